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

package kube

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestTokenServiceAccount(t *testing.T) {
	jwt := func(payload string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	tests := []struct {
		name     string
		token    string
		ns, want string
		wantErr  bool
	}{
		{name: "service account", token: jwt(`{"sub":"system:serviceaccount:knative-eventing:pingsource-mt-adapter"}`) + "\n",
			ns: "knative-eventing", want: "pingsource-mt-adapter"},
		{name: "a user", token: jwt(`{"sub":"alice"}`), wantErr: true},
		{name: "not a JWT", token: "secret", wantErr: true},
		{name: "bad payload", token: "e30.!!.sig", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(file, []byte(tc.token), 0o600); err != nil {
				t.Fatal(err)
			}
			sa, err := TokenServiceAccount(file)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if sa.Namespace != tc.ns || sa.Name != tc.want {
				t.Errorf("account = %s, want %s/%s", sa, tc.ns, tc.want)
			}
		})
	}
}
