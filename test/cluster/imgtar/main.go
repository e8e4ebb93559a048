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

// Command imgtar writes a docker-save image archive without a registry or a
// base image: one layer holding the given files and an image config with an
// entrypoint and a user. `ctr -n k8s.io image import` loads it. The archive
// is deterministic (fixed times and order), so the same inputs give the same
// image ID and a re-import changes nothing.
//
//	imgtar -o out.tar -name dev.local/x:v1 -entrypoint /x -user 65532 /host/path/x=/x ...
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "", "archive to write")
	name := flag.String("name", "", "image name, dev.local/<name>:<tag>")
	entry := flag.String("entrypoint", "", "entrypoint, words separated by spaces")
	user := flag.String("user", "65532", "user the image runs as")
	var env multi
	flag.Var(&env, "env", "KEY=VALUE for the image config (repeatable)")
	flag.Parse()
	if *out == "" || *name == "" || *entry == "" || flag.NArg() == 0 {
		log.Fatal("usage: imgtar -o out.tar -name dev.local/x:v1 -entrypoint /x [-user 65532] [-env K=V] src=dst ...")
	}
	layer, err := makeLayer(flag.Args())
	if err != nil {
		log.Fatal(err)
	}
	diffID := digest(layer)
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"Entrypoint": strings.Fields(*entry),
			"User":       *user,
			"Env":        append([]string{"PATH=/"}, env...),
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diffID}},
	})
	cfgName := digest(cfg) + ".json"
	layerName := diffID + "/layer.tar"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{*name}, "Layers": []string{layerName},
	}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := writeFile(tw, f.name, f.data, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
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
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	names = names[:0]
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
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

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
