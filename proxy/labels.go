/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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

// attrs is one attribute set as the options of Add and Record, built once.
// A prebuilt slice passed on (add...) costs nothing, where a single option
// passed to an instrument's method, an interface call, gets a slice
// allocated for it on every call.
type attrs struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newAttrs(kv ...attribute.KeyValue) *attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &attrs{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

// labelValues hands out the attributes of one label, built once per value,
// for at most max distinct values; later ones share OtherLabel.
type labelValues struct {
	key   string
	max   int64
	n     atomic.Int64
	opts  sync.Map // value -> *attrs
	other *attrs
}

func newLabelValues(key string, max int) *labelValues {
	return &labelValues{key: key, max: int64(max), other: newAttrs(attribute.String(key, OtherLabel))}
}

// option returns the attributes for value.
func (l *labelValues) option(value string) *attrs {
	if o, ok := l.opts.Load(value); ok {
		return o.(*attrs)
	}
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return l.other
	}
	o, loaded := l.opts.LoadOrStore(value, newAttrs(attribute.String(l.key, value)))
	if loaded {
		l.n.Add(-1)
	}
	return o.(*attrs)
}
