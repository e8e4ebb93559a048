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

package delivery_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{name: "minutes", in: "PT10M", want: 10 * time.Minute},
		{name: "fractional seconds", in: "PT0.5S", want: 500 * time.Millisecond},
		{name: "days and hours", in: "P1DT2H", want: 26 * time.Hour},
		{name: "week", in: "P1W", want: 7 * 24 * time.Hour},
		{name: "hours minutes fractional seconds", in: "PT1H30M15.25S", want: time.Hour + 30*time.Minute + 15250*time.Millisecond},
		{name: "every unit", in: "P2W3DT4H5M6.789S", want: 17*24*time.Hour + 4*time.Hour + 5*time.Minute + 6789*time.Millisecond},
		{name: "zero seconds", in: "PT0S", want: 0},
		{name: "zero days", in: "P0D", want: 0},
		{name: "not normalised", in: "PT36H", want: 36 * time.Hour},
		{name: "one nanosecond", in: "PT0.000000001S", want: time.Nanosecond},
		{name: "many fraction digits", in: "PT1.123456789S", want: 1123456789 * time.Nanosecond},
		{name: "seconds beyond a minute", in: "PT90S", want: 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := delivery.ParseDuration(tt.in)
			if err != nil {
				t.Fatalf("ParseDuration(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDurationInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{name: "empty", in: ""},
		{name: "P alone", in: "P"},
		{name: "PT alone", in: "PT"},
		{name: "Go syntax", in: "10m"},
		{name: "lower case", in: "pt10m"},
		{name: "years", in: "P1Y"},
		{name: "months", in: "P1M"},
		{name: "fractional minutes", in: "PT1.5M"},
		{name: "fractional days", in: "P1.5D"},
		{name: "negative seconds", in: "PT-1S"},
		{name: "negative sign in front", in: "-PT1S"},
		{name: "repeated seconds", in: "PT1S1S"},
		{name: "units out of order", in: "PT1S1M"},
		{name: "days after hours", in: "PT1HP1D"},
		{name: "weeks after days", in: "P1D1W"},
		{name: "repeated days", in: "P1D1D"},
		{name: "T as a unit", in: "P1TT1S"},
		{name: "two T", in: "PT1HT1M"},
		{name: "unit without number", in: "PTS"},
		{name: "number without unit", in: "PT1"},
		{name: "ends after T", in: "P1DT"},
		{name: "hours in date part", in: "P1H"},
		{name: "days in time part", in: "PT1D"},
		{name: "two decimal points", in: "PT1.2.3S"},
		{name: "lone decimal point", in: "PT.S"},
		{name: "leading space", in: " PT1S"},
		{name: "trailing space", in: "PT1S "},
		{name: "unknown unit", in: "PT1X"},
		{name: "too long", in: "PT99999999999999999999H"},
		{name: "too many weeks", in: "P15251W"},
		// Regression: these sum to exactly 2^63 ns as a float64, which passed
		// the "> math.MaxInt64" check and converted to a negative duration.
		{name: "seconds rounding to 2^63", in: "PT9223372036.854775807S"},
		{name: "MaxInt64 formatted", in: "PT2562047H47M16.854775807S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := delivery.ParseDuration(tt.in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error", tt.in, got)
			}
			if !errors.Is(err, delivery.ErrBadDuration) {
				t.Errorf("ParseDuration(%q) error %v does not wrap ErrBadDuration", tt.in, err)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
		want string
	}{
		{name: "zero", in: 0, want: "PT0S"},
		{name: "negative", in: -time.Second, want: "PT0S"},
		{name: "nanosecond", in: time.Nanosecond, want: "PT0.000000001S"},
		{name: "fraction", in: 1500 * time.Millisecond, want: "PT1.5S"},
		{name: "minutes", in: 10 * time.Minute, want: "PT10M"},
		{name: "hours over a day", in: 26 * time.Hour, want: "PT26H"},
		{name: "mixed", in: time.Hour + 30*time.Minute + 15250*time.Millisecond, want: "PT1H30M15.25S"},
		{name: "hours and seconds", in: time.Hour + time.Second, want: "PT1H1S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delivery.FormatDuration(tt.in); got != tt.want {
				t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
	}{
		{name: "zero", d: 0},
		{name: "nanosecond", d: time.Nanosecond},
		{name: "sub-microsecond", d: 999 * time.Nanosecond},
		{name: "millisecond", d: time.Millisecond},
		{name: "half second", d: 500 * time.Millisecond},
		{name: "just under a minute", d: time.Minute - time.Nanosecond},
		{name: "ten minutes", d: 10 * time.Minute},
		{name: "odd mix", d: 3*time.Hour + 7*time.Minute + 300*time.Millisecond + 7*time.Nanosecond},
		{name: "a thousand hours and a nanosecond", d: 1000*time.Hour + time.Nanosecond},
		{name: "a century", d: 100 * 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := delivery.FormatDuration(tt.d)
			got, err := delivery.ParseDuration(s)
			if err != nil {
				t.Fatalf("ParseDuration(FormatDuration(%v) = %q) error: %v", tt.d, s, err)
			}
			if got != tt.d {
				t.Errorf("ParseDuration(%q) = %v, want %v", s, got, tt.d)
			}
		})
	}
}

// roundTripTolerance allows for the float64 arithmetic of ParseDuration: one
// nanosecond of truncation plus a few ulps relative to d.
func roundTripTolerance(d time.Duration) time.Duration {
	return time.Nanosecond + d>>48
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"PT10M", "PT0.5S", "P1DT2H", "P1W", "PT1H30M15.25S", "PT0S", "P2W3DT4H5M6.789S",
		"", "P", "PT", "10m", "P1Y", "P1M", "PT1.5M", "PT-1S", "PT1S1S", "P1TT1S", "PTS",
		"PT9223372036.854775807S", "PT2562047H47M16.854775807S", "P15250W", "PT0.000000001S",
	} {
		f.Add(s)
	}
	f.Add(delivery.FormatDuration(math.MaxInt64))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := delivery.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, delivery.ErrBadDuration) {
				t.Fatalf("ParseDuration(%q) error %v does not wrap ErrBadDuration", s, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		formatted := delivery.FormatDuration(d)
		again, err := delivery.ParseDuration(formatted)
		if err != nil {
			t.Fatalf("ParseDuration(%q) (formatted from %v, parsed from %q) error: %v", formatted, d, s, err)
		}
		diff := again - d
		if diff < 0 {
			diff = -diff
		}
		if tol := roundTripTolerance(d); diff > tol {
			t.Fatalf("round trip of %q: %v -> %q -> %v, off by %v (tolerance %v)", s, d, formatted, again, diff, tol)
		}
	})
}
