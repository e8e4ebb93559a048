package proxy

import (
	"net/http"
	"time"
)

// NewMetricsHandler is the outermost handler: it starts the request's call
// record, and when the request ends records its outcome, status class,
// duration and the proxy's reason, if it answered itself.
func NewMetricsHandler(m *Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		c := &call{metrics: m}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if c.probe {
				return
			}
			o := outcomeOf(c, sw.status, sw.reason)
			if p := recover(); p != nil {
				// The answer broke off mid-stream (ReverseProxy aborts with
				// http.ErrAbortHandler): count it failed, then let it abort.
				m.ended(outcomeFailed, sw.status, time.Since(start).Seconds(), sw.reason)
				panic(p)
			}
			m.ended(o, sw.status, time.Since(start).Seconds(), sw.reason)
		}()
		next.ServeHTTP(sw, r.WithContext(withCall(r.Context(), c)))
	})
}

// statusWriter remembers the status written and the proxy's own reason.
// Unwrap lets http.ResponseController reach the connection's writer for
// flushes and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
	reason Reason
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
