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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// imageSpec is what every platform's image shares.
type imageSpec struct {
	entrypoint []string
	user       string
	env        []string
	files      []string // src=dst; src may name {arch}
}

// image is one platform's layer and config.
type image struct {
	os, arch string
	layer    []byte // uncompressed tar
	config   []byte
}

// pairs are the spec's src=dst pairs for arch.
func (s imageSpec) pairs(arch string) []string {
	pairs := make([]string, len(s.files))
	for i, f := range s.files {
		pairs[i] = strings.ReplaceAll(f, "{arch}", arch)
	}
	return pairs
}

func (s imageSpec) build(osName, arch string) (image, error) {
	layer, err := makeLayer(s.pairs(arch))
	if err != nil {
		return image{}, err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           osName,
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"Entrypoint": s.entrypoint,
			"User":       s.user,
			"Env":        append([]string{"PATH=/"}, s.env...),
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + digest(layer)}},
	})
	if err != nil {
		return image{}, err
	}
	return image{os: osName, arch: arch, layer: layer, config: config}, nil
}

// makeLayer tars each src=dst pair at dst (with its parent directories) and
// an empty /tmp, which many programs expect.
func makeLayer(pairs []string) ([]byte, error) {
	files := map[string]string{}
	dirs := map[string]bool{"tmp": true}
	for _, p := range pairs {
		src, dst, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want src=dst", p)
		}
		dst = strings.TrimPrefix(path.Clean("/"+dst), "/")
		files[dst] = src
		for d := path.Dir(dst); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		data, err := os.ReadFile(files[f])
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(files[f])
		if err != nil {
			return nil, err
		}
		if err := writeFile(tw, f, data, int64(st.Mode().Perm())); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// archiveFile is one entry of an archive.
type archiveFile struct {
	name string
	data []byte
}

func tarFiles(files []archiveFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := writeFile(tw, f.name, f.data, 0o644); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
