// Package adapter is what a multi-tenant source uses to send its events:
// the Sender, which delivers each event directly to its sink or hands it
// to the event-forwarding proxy; the Router, which picks the route from
// the forwarding configuration and the number of sources served; and the
// tokens the sends carry when OIDC is on. Package adapter/kube connects
// them to a cluster (the live ConfigMap watch, the TokenRequest API), and
// adapter/mtping is the PingSource adapter built on them.
//
// It never links the proxy's inbound side: a source does not carry the
// server.
package adapter
