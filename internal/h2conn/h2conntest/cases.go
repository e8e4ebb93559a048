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

// Package h2conntest holds, as one table, what both ends of the project's
// h2c connections must do alike with what their peer sends: the inbound
// server (proxy/internal/h2server) and the h2c client (delivery/h2c) each
// run every case against a raw peer, so that a behaviour cannot drift
// between them. For tests only.
package h2conntest

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// The streams of a case: the runner opens stream Open (a request the end
// holds, its body open both ways and read by nobody) before the case's
// frames; stream Idle was never opened.
const (
	Open uint32 = 1
	Idle uint32 = 3
)

// Answer is how the end under test must answer a case's frames.
type Answer int

const (
	// GoAway: a GOAWAY with the case's code, and the connection closes.
	GoAway Answer = iota
	// Reset: RST_STREAM on stream Open with the case's code; the
	// connection lives on.
	Reset
	// SettingsAck: an ack of the SETTINGS sent.
	SettingsAck
	// PingAck: a PING ack that carries the case's Ping.
	PingAck
)

// Ping is the data of the PINGs the cases send.
var Ping = [8]byte{'h', '2', 'c', 'o', 'n', 'n'}

// Case is one behaviour: the frames a peer sends, and the answer.
type Case struct {
	Name string
	// Send writes the peer's frames; window is the end's initial stream
	// window (what its SETTINGS announced), which stream Open has not
	// used yet.
	Send   func(fr *http2.Framer, window uint32) error
	Answer Answer
	Code   http2.ErrCode
}

// Cases are the behaviours both ends share (RFC 9113 section numbers in
// the names).
var Cases = []Case{
	{
		Name:   "WINDOW_UPDATE on an idle stream (5.1)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WriteWindowUpdate(Idle, 1) },
		Answer: GoAway, Code: http2.ErrCodeProtocol,
	},
	{
		Name:   "WINDOW_UPDATE past the connection's largest window (6.9.1)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WriteWindowUpdate(0, h2conn.MaxWindow) },
		Answer: GoAway, Code: http2.ErrCodeFlowControl,
	},
	{
		Name:   "WINDOW_UPDATE past a stream's largest window (6.9.1)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WriteWindowUpdate(Open, h2conn.MaxWindow) },
		Answer: Reset, Code: http2.ErrCodeFlowControl,
	},
	{
		Name: "SETTINGS that move an open stream's window past the largest (6.9.2)",
		Send: func(fr *http2.Framer, _ uint32) error {
			// Stream Open's send window is the initial 65,535 bytes: grown
			// to the largest, it cannot take one more.
			if err := fr.WriteWindowUpdate(Open, h2conn.MaxWindow-h2conn.InitialWindow); err != nil {
				return err
			}
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2conn.InitialWindow + 1})
		},
		Answer: GoAway, Code: http2.ErrCodeFlowControl,
	},
	{
		Name: "SETTINGS with an initial window past the largest (6.5.2)",
		Send: func(fr *http2.Framer, _ uint32) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2conn.MaxWindow + 1})
		},
		Answer: GoAway, Code: http2.ErrCodeFlowControl,
	},
	{
		Name: "SETTINGS with a frame size below the smallest (6.5.2)",
		Send: func(fr *http2.Framer, _ uint32) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: h2conn.InitialFrame - 1})
		},
		Answer: GoAway, Code: http2.ErrCodeProtocol,
	},
	{
		Name: "SETTINGS acked (6.5.3)",
		Send: func(fr *http2.Framer, _ uint32) error {
			return fr.WriteSettings(
				http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0},
				http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
				http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
		},
		Answer: SettingsAck,
	},
	{
		Name:   "PING answered (6.7)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WritePing(false, Ping) },
		Answer: PingAck,
	},
	{
		Name:   "RST_STREAM on an idle stream (6.4)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WriteRSTStream(Idle, http2.ErrCodeCancel) },
		Answer: GoAway, Code: http2.ErrCodeProtocol,
	},
	{
		Name:   "DATA on an idle stream (5.1)",
		Send:   func(fr *http2.Framer, _ uint32) error { return fr.WriteData(Idle, false, []byte("x")) },
		Answer: GoAway, Code: http2.ErrCodeProtocol,
	},
	{
		Name: "DATA past a stream's window (6.9.1)",
		Send: func(fr *http2.Framer, window uint32) error {
			chunk := bytes.Repeat([]byte("x"), h2conn.InitialFrame)
			for left := int(window) + 1; left > 0; left -= len(chunk) {
				if err := fr.WriteData(Open, false, chunk[:min(left, len(chunk))]); err != nil {
					return err
				}
			}
			return nil
		},
		Answer: Reset, Code: http2.ErrCodeFlowControl,
	},
	{
		Name: "PUSH_PROMISE (8.4)",
		Send: func(fr *http2.Framer, _ uint32) error {
			return fr.WritePushPromise(http2.PushPromiseParam{StreamID: Open, PromiseID: 2, EndHeaders: true})
		},
		Answer: GoAway, Code: http2.ErrCodeProtocol,
	},
}

// Run runs each case as a subtest of t, with the end's own runner.
func Run(t *testing.T, run func(t *testing.T, tc Case)) {
	for _, tc := range Cases {
		t.Run(tc.Name, func(t *testing.T) { run(t, tc) })
	}
}
