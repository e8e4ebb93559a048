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

package manifests

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// applySets are the folders an operator applies with `ko apply -f`:
// config/ (the default install, async profile), config/async/ (the
// Prometheus Adapter rule that profile needs), config/sync/ and
// config/async-kpa/ (the other profiles, each replacing the async one).
// Documents are checked in this order.
var applySets = []string{"config", "config/async", "config/sync", "config/async-kpa"}

// loadConfig returns every document of applySets, failing the test if
// there are none.
func loadConfig(t *testing.T) []Document {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	docs, err := Load(repoRoot, applySets...)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no YAML documents under config/")
	}
	return docs
}

// scheme knows every kind config/ may hold.
func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, autoscalingv2.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme, servingv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// decodeStrict decodes a document into a new object of its kind; unknown
// or repeated fields are errors.
func decodeStrict(s *runtime.Scheme, d Document) (runtime.Object, error) {
	obj, err := s.New(d.GVK)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(d.YAML, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// find returns the documents of one kind, name and file, failing the test
// unless there is exactly one.
func find(t *testing.T, docs []Document, file string, gvk schema.GroupVersionKind, name string) Document {
	t.Helper()
	var found []Document
	for _, d := range docs {
		if d.File == file && d.GVK == gvk && d.Name == name {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q in %s, found %d", gvk.Kind, name, file, len(found))
	}
	return found[0]
}
