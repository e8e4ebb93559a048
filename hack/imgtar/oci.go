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

package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// ociLayout collects the blobs of an OCI image layout.
type ociLayout struct {
	files []archiveFile
	seen  map[string]bool
}

func (l *ociLayout) add(mediaType string, blob []byte) descriptor {
	d := "sha256:" + digest(blob)
	if !l.seen[d] {
		l.seen[d] = true
		l.files = append(l.files, archiveFile{"blobs/sha256/" + strings.TrimPrefix(d, "sha256:"), blob})
	}
	return descriptor{MediaType: mediaType, Digest: d, Size: len(blob)}
}

func (l *ociLayout) addJSON(mediaType string, v any) (descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	return l.add(mediaType, b), nil
}

// ociArchive is an OCI image layout, as a tar, whose index.json names one
// image index (name, for containerd's import) over images; it returns the
// image index's digest too.
func ociArchive(images []image, name string) ([]byte, string, error) {
	l := &ociLayout{seen: map[string]bool{}}
	var manifests []descriptor
	for _, img := range images {
		layer, err := gzipped(img.layer)
		if err != nil {
			return nil, "", err
		}
		m, err := l.addJSON(mediaManifest, map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaManifest,
			"config":        l.add(mediaConfig, img.config),
			"layers":        []descriptor{l.add(mediaLayer, layer)},
		})
		if err != nil {
			return nil, "", err
		}
		m.Platform = &platform{Architecture: img.arch, OS: img.os}
		manifests = append(manifests, m)
	}
	index, err := l.addJSON(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
	if err != nil {
		return nil, "", err
	}
	top := index
	top.Annotations = map[string]string{"io.containerd.image.name": name}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		top.Annotations["org.opencontainers.image.ref.name"] = name[i+1:]
	}
	indexJSON, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{top}})
	if err != nil {
		return nil, "", err
	}
	files := append([]archiveFile{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
	}, l.files...)
	archive, err := tarFiles(files)
	return archive, index.Digest, err
}

// gzipped compresses deterministically: no name, no time in the header.
func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
