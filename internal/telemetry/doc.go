// Package telemetry sets up what both mains export: a MeterProvider whose
// instruments are served in Prometheus text, the server for them, and an
// OTLP TracerProvider. It belongs to neither the proxy nor the source side,
// so that each binary links only its own half.
package telemetry
