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

// Package manifests reads the YAML an operator applies: every document
// under the repository's config/ folder. Its tests check the documents
// against their Go types, Knative Serving's own validation and autoscaler
// code, and a real API server (test/apiserver).
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one YAML document of a manifest file.
type Document struct {
	// File is the file's path relative to the repository root, with
	// forward slashes (config/400-proxy.yaml).
	File string
	// Index is the document's position in its file, from 0.
	Index int
	// YAML is the document's text.
	YAML []byte
	// GVK, Name and Namespace are read from the document's header.
	GVK       schema.GroupVersionKind
	Name      string
	Namespace string
}

// String names the document for test output: file#index kind name.
func (d Document) String() string {
	return fmt.Sprintf("%s#%d %s %s", d.File, d.Index, d.GVK.Kind, d.Name)
}

// header is the part of every Kubernetes object Load reads.
type header struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// Load reads every document of the .yaml and .yml files in each of dirs
// (relative to root; not their subfolders), as `ko apply -f dir` would: the
// folders in the order given, the files of a folder in lexical order.
// Empty documents (comments only) are left out; a document that is not a
// Kubernetes object (no apiVersion or kind) is an error, as it is for
// kubectl.
func Load(root string, dirs ...string) ([]Document, error) {
	var docs []Document
	for _, dir := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			return nil, err
		}
		for _, e := range entries { // sorted by name
			if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			rel := filepath.ToSlash(filepath.Join(dir, e.Name()))
			fileDocs, err := readFile(filepath.Join(root, rel), rel)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", rel, err)
			}
			docs = append(docs, fileDocs...)
		}
	}
	return docs, nil
}

func readFile(path, rel string) ([]Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var docs []Document
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for i := 0; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var content map[string]any
		if err := yaml.Unmarshal(raw, &content); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(content) == 0 {
			continue // only comments
		}
		var h header
		if err := yaml.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if h.APIVersion == "" || h.Kind == "" {
			return nil, fmt.Errorf("document %d is not a Kubernetes object: no apiVersion or kind", i)
		}
		docs = append(docs, Document{
			File:      rel,
			Index:     i,
			YAML:      raw,
			GVK:       h.GroupVersionKind(),
			Name:      h.Metadata.Name,
			Namespace: h.Metadata.Namespace,
		})
	}
}
