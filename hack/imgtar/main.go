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

// Command imgtar writes an image archive without a registry or a base
// image: one layer holding the given files and an image config with an
// entrypoint and a user. The archive is deterministic (fixed times and
// order), so the same inputs give the same digests.
//
// Two formats. docker (the default): a docker-save archive of one
// platform, which `ctr -n k8s.io image import` loads. oci: an OCI image
// layout with an index over one image per -platforms entry, which `ctr
// image import`, `skopeo copy oci-archive:` and `crane push` read, the
// layer gzip-compressed as a registry serves it; it prints the index's
// digest, the one a registry keeps when the layout is pushed unchanged.
// A source may name {arch}, replaced per platform. With -sbom, an oci
// archive gets its CycloneDX bill of materials beside it: the Go modules
// its programs link, from their build info (sbom.go).
//
//	imgtar -o out.tar -name dev.local/x:v1 -entrypoint /x [-user 65532] /host/path/x=/x ...
//	imgtar -format oci -platforms linux/amd64,linux/arm64 -o out.tar -name reg/x:v1 -entrypoint /x [-sbom x.cdx.json] bin/x-{arch}=/x
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
)

func main() {
	out := flag.String("o", "", "archive to write")
	name := flag.String("name", "", "image name, <registry>/<name>:<tag>")
	entry := flag.String("entrypoint", "", "entrypoint, words separated by spaces")
	user := flag.String("user", "65532", "user the image runs as")
	format := flag.String("format", "docker", "docker or oci")
	platforms := flag.String("platforms", "linux/amd64", "os/arch list, comma-separated (oci; docker takes the first)")
	sbomFile := flag.String("sbom", "", "the image's CycloneDX bill of materials to write (oci)")
	var env multi
	flag.Var(&env, "env", "KEY=VALUE for the image config (repeatable)")
	flag.Parse()
	if *out == "" || *name == "" || *entry == "" || flag.NArg() == 0 {
		log.Fatal("usage: imgtar [-format docker|oci] [-platforms linux/amd64,...] -o out.tar -name dev.local/x:v1 -entrypoint /x [-user 65532] [-env K=V] src=dst ...")
	}
	spec := imageSpec{entrypoint: strings.Fields(*entry), user: *user, env: env, files: flag.Args()}
	list := strings.Split(*platforms, ",")
	if *sbomFile != "" && *format != "oci" {
		log.Fatal("-sbom names the image by its index: it needs -format oci")
	}
	images := make([]image, 0, len(list))
	binaries := make([]binary, 0, len(list))
	for _, p := range list {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			log.Fatalf("platform %q: want os/arch", p)
		}
		img, err := spec.build(osName, arch)
		if err != nil {
			log.Fatal(err)
		}
		images = append(images, img)
		binaries = append(binaries, goBinaries(osName+"/"+arch, spec.pairs(arch))...)
	}
	var (
		archive []byte
		err     error
	)
	switch *format {
	case "docker":
		archive, err = dockerArchive(images[0], *name)
	case "oci":
		var index string
		archive, index, err = ociArchive(images, *name)
		if err == nil && *sbomFile != "" {
			err = writeSBOM(*sbomFile, *name, index, binaries)
		}
		if err == nil {
			fmt.Println(index)
		}
	default:
		log.Fatalf("format %q: want docker or oci", *format)
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, archive, 0o644); err != nil { //nolint:gosec // an image archive is for others to read and push
		log.Fatal(err)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
