package proxy

import (
	"net/http"

	"go.uber.org/zap"
)

// DefaultLoopID is the identity the proxy writes into CDN-Loop.
const DefaultLoopID = "knative-event-forwarding-proxy"

// NewLoopHandler refuses, before anything else, a request that already
// passed through this proxy (its identity is in CDN-Loop) with 403
// loop_detected: not 508, which Knative senders would retry forever.
func NewLoopHandler(id string, logger *zap.SugaredLogger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasLoopMark(r.Header, id) {
			logger.Infow("Refused a call", zap.String("reason", string(ReasonLoopDetected)),
				zap.String("ceId", r.Header.Get("Ce-Id")))
			writeError(w, ReasonLoopDetected, "the request already passed through this proxy")
			return
		}
		next.ServeHTTP(w, r)
	})
}
