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
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// TestOCIArchive reads the archive back with go-containerregistry's OCI
// layout reader and validates every digest, size and diff ID in it, then
// checks each platform's config and that a second run gives the same
// bytes.
func TestOCIArchive(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range []string{"amd64", "arm64"} {
		if err := os.WriteFile(filepath.Join(dir, "x-"+arch), []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := imageSpec{entrypoint: []string{"/x"}, user: "65532", files: []string{filepath.Join(dir, "x-{arch}") + "=/x"}}
	build := func() ([]byte, string) {
		var images []image
		for _, arch := range []string{"amd64", "arm64"} {
			img, err := spec.build("linux", arch)
			if err != nil {
				t.Fatal(err)
			}
			images = append(images, img)
		}
		archive, index, err := ociArchive(images, "registry.example/x:v1")
		if err != nil {
			t.Fatal(err)
		}
		return archive, index
	}
	archive, indexDigest := build()
	if again, _ := build(); !bytes.Equal(archive, again) {
		t.Error("two runs gave different archives")
	}

	root := untar(t, archive)
	top, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want 1", len(topManifest.Manifests))
	}
	entry := topManifest.Manifests[0]
	if entry.Digest.String() != indexDigest {
		t.Errorf("index.json names %s, imgtar printed %s", entry.Digest, indexDigest)
	}
	if entry.Annotations["io.containerd.image.name"] != "registry.example/x:v1" || entry.Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Errorf("annotations %v", entry.Annotations)
	}
	idx, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("invalid image index: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range m.Manifests {
		archs = append(archs, d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" || !slices.Equal(cfg.Config.Entrypoint, []string{"/x"}) || cfg.Config.User != "65532" {
			t.Errorf("%s: config %+v", d.Platform.Architecture, cfg)
		}
		if got := layerFile(t, img, "x"); got != "binary for "+d.Platform.Architecture {
			t.Errorf("%s: /x holds %q", d.Platform.Architecture, got)
		}
	}
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v", archs)
	}
}

// untar writes the archive's files under a new directory.
func untar(t *testing.T, archive []byte) string {
	t.Helper()
	root := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// layerFile is the content of name in the image's only layer.
func layerFile(t *testing.T, img v1.Image, name string) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the layer: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}
