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

package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	// The folders of CRDs, imported so that their modules stay in go.mod at
	// the versions the project builds against.
	_ "knative.dev/eventing/config/core/resources"
	_ "knative.dev/serving/config/core/300-resources"
)

// crdPackages hold the Knative CRDs (Service, Revision, PodAutoscaler...;
// PingSource, Broker, Trigger...) as YAML files.
var crdPackages = []string{
	"knative.dev/serving/config/core/300-resources",
	"knative.dev/eventing/config/core/resources",
}

var crdResource = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// installKnativeCRDs creates every CRD shipped in crdPackages and waits
// until the API server serves them.
func installKnativeCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := knativeCRDs()
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crdClient := client.Resource(crdResource)
	for _, crd := range crds {
		if _, err := crdClient.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		for {
			got, err := crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w (last error: %w)", crd.GetName(), ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// established reports whether a CRD's Established and NamesAccepted
// conditions are both True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	want := map[string]bool{"Established": false, "NamesAccepted": false}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if t, _ := m["type"].(string); m["status"] == "True" {
			if _, ok := want[t]; ok {
				want[t] = true
			}
		}
	}
	return want["Established"] && want["NamesAccepted"]
}

// knativeCRDs reads the CustomResourceDefinition documents of crdPackages
// from the module cache.
func knativeCRDs() ([]*unstructured.Unstructured, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.Dir}}"}, crdPackages...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %v: %w: %s", crdPackages, err, stderr.String())
	}
	var crds []*unstructured.Unstructured
	for _, dir := range strings.Fields(string(out)) {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			docs, err := readCRDs(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			crds = append(crds, docs...)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in %v", crdPackages)
	}
	return crds, nil
}

// readCRDs returns the CustomResourceDefinition documents of one file.
func readCRDs(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: obj}
		if len(obj) > 0 && u.GetKind() == "CustomResourceDefinition" {
			out = append(out, u)
		}
	}
}
