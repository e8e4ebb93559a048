package proxy

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OtherLabel is the label value that every value past a label's cap
// collapses into, so that callers cannot grow the series without bound.
const OtherLabel = "_other"

// labelValues hands out the attribute option of one label, built once per
// value, for at most max distinct values; later ones share OtherLabel.
type labelValues struct {
	key   string
	max   int64
	n     atomic.Int64
	opts  sync.Map // value -> metric.MeasurementOption
	other metric.MeasurementOption
}

func newLabelValues(key string, max int) *labelValues {
	return &labelValues{
		key:   key,
		max:   int64(max),
		other: metric.WithAttributeSet(attribute.NewSet(attribute.String(key, OtherLabel))),
	}
}

// option returns the attribute option for value.
func (l *labelValues) option(value string) metric.MeasurementOption {
	if o, ok := l.opts.Load(value); ok {
		return o.(metric.MeasurementOption)
	}
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return l.other
	}
	o, loaded := l.opts.LoadOrStore(value, metric.WithAttributeSet(attribute.NewSet(attribute.String(l.key, value))))
	if loaded {
		l.n.Add(-1)
	}
	return o.(metric.MeasurementOption)
}
