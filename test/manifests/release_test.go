//go:build integration

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
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

const releaseRegistry = "registry.example/knative"

// releaseImage is an image reference as the release YAML must name it.
var releaseImage = regexp.MustCompile(`^` + regexp.QuoteMeta(releaseRegistry) + `/(event-forwarding-(?:proxy|mtping))@(sha256:[0-9a-f]{64})$`)

// TestRelease builds the release as `make release` does, into a temporary
// folder, and checks what docs/install.md says of it: one YAML per profile
// with config/'s objects and the images by the digests of the archives
// beside them, the adapter image's environment, nothing of Eventing's
// config-leader-election, checksums that hold, and the same digests from a
// second build of the same tree.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	imgtar := filepath.Join(dir, "imgtar")
	if err := testproc.GoBuild(imgtar, "hack/imgtar", false); err != nil {
		t.Fatalf("building imgtar: %v", err)
	}
	out := buildRelease(t, imgtar, filepath.Join(dir, "release"))
	digests := map[string]string{}
	for _, name := range []string{"event-forwarding-proxy", "event-forwarding-mtping"} {
		digests[name] = archiveIndex(t, filepath.Join(out, "images", name+".tar"))
	}

	t.Run("profiles", func(t *testing.T) {
		profiles := map[string][]string{
			"async":     {"config/400-proxy.yaml", "config/async/600-pingsource-adapter-hpa.yaml"},
			"sync":      {"config/sync/400-proxy.yaml"},
			"async-kpa": {"config/async-kpa/400-proxy.yaml"},
		}
		for profile, files := range profiles {
			t.Run(profile, func(t *testing.T) {
				file := "event-forwarding-proxy-" + profile + ".yaml"
				text, err := os.ReadFile(filepath.Join(out, file))
				if err != nil {
					t.Fatal(err)
				}
				for _, banned := range []string{"ko://", ":latest"} {
					if strings.Contains(string(text), banned) {
						t.Errorf("%s holds %q", file, banned)
					}
				}
				// Quoted, so that a version of digits alone (a hash) stays a string.
				for _, m := range regexp.MustCompile(`(?m)^\s*app\.kubernetes\.io/version: (.*)$`).FindAllStringSubmatch(string(text), -1) {
					if !strings.HasPrefix(m[1], `"`) {
						t.Errorf("%s: version label %s is not quoted", file, m[1])
					}
				}
				if !strings.Contains(string(text), "pingsource-mt-adapter-patch.yaml") {
					t.Errorf("%s does not say up front that the adapter's image goes in with the patch", file)
				}
				docs, err := readFile(filepath.Join(out, file), file)
				if err != nil {
					t.Fatal(err)
				}
				// The proxy's image only: the adapter's is in the patch.
				checkReleaseImages(t, docs, map[string]string{"event-forwarding-proxy": digests["event-forwarding-proxy"]})
				checkReleaseObjects(t, docs, files, digests, releaseVersion(t, string(text)))
			})
		}
	})

	t.Run("adapter patch", func(t *testing.T) { checkAdapterPatch(t, out, digests) })
	t.Run("KnativeEventing patch", func(t *testing.T) { checkKnativeEventingPatch(t, out, digests) })

	t.Run("adapter image environment", func(t *testing.T) {
		archive := filepath.Join(out, "images", "event-forwarding-mtping.tar")
		for _, platform := range []string{"amd64", "arm64"} {
			env := imageEnv(t, archive, platform)
			for k, want := range mtpingImageEnv {
				if env[k] != want {
					t.Errorf("%s image: %s=%q, want %q", platform, k, env[k], want)
				}
			}
		}
	})

	t.Run("checksums", func(t *testing.T) { checkSums(t, out) })
	t.Run("bills of materials", func(t *testing.T) { checkSBOMs(t, out, digests) })

	t.Run("same tree, same digests", func(t *testing.T) {
		again := buildRelease(t, imgtar, filepath.Join(dir, "again"))
		for name, d := range digests {
			if got := archiveIndex(t, filepath.Join(again, "images", name+".tar")); got != d {
				t.Errorf("%s: %s, then %s", name, d, got)
			}
			sbom := filepath.Join("images", name+".sbom.cdx.json")
			first, err1 := os.ReadFile(filepath.Join(out, sbom))
			second, err2 := os.ReadFile(filepath.Join(again, sbom))
			if err1 != nil || err2 != nil || string(first) != string(second) {
				t.Errorf("%s differs from one build of the same tree to the next (%v, %v)", sbom, err1, err2)
			}
		}
	})

	t.Run("docs name what the release holds", func(t *testing.T) { checkInstallDoc(t, out) })
	t.Run("the switch to sync leaves nothing behind", func(t *testing.T) { checkSwitchToSync(t, out) })
}

// buildRelease runs hack/release.sh into out.
func buildRelease(t *testing.T, imgtar, out string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "hack/release.sh"))
	cmd.Env = append(os.Environ(), "RELEASE_REGISTRY="+releaseRegistry, "RELEASE_DIR="+out, "IMGTAR="+imgtar)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, b)
	}
	return out
}

// archiveIndex is the image index digest an OCI archive's index.json
// names, after checking the index covers both platforms.
func archiveIndex(t *testing.T, archive string) string {
	t.Helper()
	files := tarFiles(t, archive)
	var top struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("%s: index.json %s (%v)", archive, files["index.json"], err)
	}
	d := top.Manifests[0].Digest
	var index struct {
		Manifests []struct {
			Platform struct{ OS, Architecture string } `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")], &index); err != nil {
		t.Fatalf("%s: image index %s: %v", archive, d, err)
	}
	var platforms []string
	for _, m := range index.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("%s: platforms %v", archive, platforms)
	}
	return d
}

func tarFiles(t *testing.T, archive string) map[string][]byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if strings.HasSuffix(h.Name, ".json") || h.Size < 1<<20 {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// imageEnv is the environment in the image config of an OCI archive's
// image for one architecture.
func imageEnv(t *testing.T, archive, arch string) map[string]string {
	t.Helper()
	files := tarFiles(t, archive)
	blob := func(digest string, v any) {
		t.Helper()
		if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")], v); err != nil {
			t.Fatalf("%s: blob %s: %v", archive, digest, err)
		}
	}
	type descriptor struct {
		Digest   string
		Platform struct{ Architecture string }
	}
	var index struct{ Manifests []descriptor }
	blob(archiveIndex(t, archive), &index)
	for _, m := range index.Manifests {
		if m.Platform.Architecture != arch {
			continue
		}
		var manifest struct{ Config descriptor }
		blob(m.Digest, &manifest)
		var cfg struct {
			Config struct{ Env []string }
		}
		blob(manifest.Config.Digest, &cfg)
		env := map[string]string{}
		for _, kv := range cfg.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		return env
	}
	t.Fatalf("%s: no %s image", archive, arch)
	return nil
}

// checkReleaseImages checks every container names a release image by the
// digest of its archive.
func checkReleaseImages(t *testing.T, docs []Document, digests map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range docs {
		for _, img := range containerImages(t, d) {
			m := releaseImage.FindStringSubmatch(img)
			switch {
			case m == nil:
				t.Errorf("%s: image %q, want %s/<name>@sha256:<digest>", d, img, releaseRegistry)
			case digests[m[1]] != m[2]:
				t.Errorf("%s: image %q, but its archive's index is %s", d, img, digests[m[1]])
			default:
				seen[m[1]] = true
			}
		}
	}
	if len(seen) != len(digests) {
		t.Errorf("images used: %v, want every one of %v", seen, slices.Sorted(maps.Keys(digests)))
	}
}

// containerImages are the images of a document's pod template, if any.
func containerImages(t *testing.T, d Document) []string {
	t.Helper()
	var obj struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Image string } `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(d.YAML, &obj); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	var images []string
	for _, c := range obj.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	return images
}

// checkReleaseObjects checks the profile holds config/'s objects but the
// Service, and the profile's files (its Service first), each the same as
// its source but for the images; and nothing of Eventing's
// config-leader-election.
func checkReleaseObjects(t *testing.T, docs []Document, profileFiles []string, digests map[string]string, version string) {
	t.Helper()
	src, err := Load(repoRoot, "config")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, d := range src {
		if d.File != "config/400-proxy.yaml" {
			want[objectKey(d)] = versioned(t, d, resolved(t, d, digests), version)
		}
	}
	for _, f := range profileFiles {
		fileDocs, err := readFile(filepath.Join(repoRoot, f), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range fileDocs {
			want[objectKey(d)] = versioned(t, d, resolved(t, d, digests), version)
		}
	}
	got := map[string]any{}
	for _, d := range docs {
		if d.GVK.Kind == "ConfigMap" && d.Name == "config-leader-election" {
			t.Errorf("%s replaces Eventing's config-leader-election: the adapter's buckets are its own ConfigMap's", d)
		}
		got[objectKey(d)] = resolved(t, d, nil)
	}
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("objects %v, want %v", g, w)
	}
	for k, w := range want {
		gj, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("%s differs from config/:\n got %s\nwant %s", k, gj, wj)
		}
	}
}

// releaseVersion is the version a release YAML's header names.
func releaseVersion(t *testing.T, text string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^# event-forwarding-proxy (\S+), `).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the release YAML's header names no version")
	}
	return m[1]
}

// versioned is v, an object of config/, as the release writes it: with
// the label app.kubernetes.io/version beside app.kubernetes.io/name, which
// every object of config/ must carry.
func versioned(t *testing.T, d Document, v any, version string) any {
	t.Helper()
	meta, _ := v.(map[string]any)["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels["app.kubernetes.io/name"] != "event-forwarding-proxy" {
		t.Errorf("%s has no label app.kubernetes.io/name: event-forwarding-proxy", d)
		return v
	}
	labels["app.kubernetes.io/version"] = version
	return v
}

func objectKey(d Document) string {
	return fmt.Sprintf("%s %s/%s", d.GVK.Kind, d.Namespace, d.Name)
}

// resolved is the document as data, its ko:// images replaced by the
// release's (with digests; as is without).
func resolved(t *testing.T, d Document, digests map[string]string) any {
	t.Helper()
	text := string(d.YAML)
	for name, digest := range digests {
		cmd := strings.TrimPrefix(name, "event-forwarding-")
		text = strings.ReplaceAll(text, "ko://"+module+"/cmd/"+cmd, releaseRegistry+"/"+name+"@"+digest)
	}
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	return v
}

// checkSums checks SHA256SUMS lists every file of the release, rightly.
func checkSums(t *testing.T, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		name = filepath.Clean(name)
		listed[name] = true
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: checksum %s does not hold", name, sum)
		}
	}
	err = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		if rel != "SHA256SUMS" && !listed[rel] {
			t.Errorf("%s is not in SHA256SUMS", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkAdapterPatch checks the release's patch of Eventing's adapter
// Deployment: config/'s, with the adapter's image by digest, applying to
// upstream's Deployment with that image as its only change.
func checkAdapterPatch(t *testing.T, out string, digests map[string]string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(out, "pingsource-mt-adapter-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, adapterPatchFile))
	if err != nil {
		t.Fatal(err)
	}
	image := releaseRegistry + "/event-forwarding-mtping@" + digests["event-forwarding-mtping"]
	var gotData, wantData any
	if err := yaml.Unmarshal(got, &gotData); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(src), "ko://"+module+"/cmd/mtping", image)), &wantData); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(gotData)
	wj, _ := json.Marshal(wantData)
	if string(gj) != string(wj) {
		t.Errorf("the release's patch differs from %s:\n got %s\nwant %s", adapterPatchFile, gj, wj)
	}
	if strings.Contains(string(got), "ko resolve") {
		t.Error("the release's patch keeps the note for ko users")
	}
	upstream, _ := adapterDeployment(t)
	orig, err := json.Marshal(upstream)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(merged, &d); err != nil {
		t.Fatal(err)
	}
	if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != image {
		t.Errorf("patched containers %+v, want upstream's one running %s", c, image)
	}
}

// checkKnativeEventingPatch checks the release's merge patch of a
// KnativeEventing: the one registry override the Knative Operator reads
// as <Deployment>/<container>, naming upstream's adapter Deployment and
// its container, with the adapter's image by digest.
func checkKnativeEventingPatch(t *testing.T, out string, digests map[string]string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(out, "knativeeventing-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := adapterDeployment(t)
	containers := upstream.Spec.Template.Spec.Containers
	if len(containers) != 1 {
		t.Fatalf("upstream's adapter has %d containers", len(containers))
	}
	image := releaseRegistry + "/event-forwarding-mtping@" + digests["event-forwarding-mtping"]
	want := map[string]any{"spec": map[string]any{"registry": map[string]any{"override": map[string]any{
		upstream.Name + "/" + containers[0].Name: image,
	}}}}
	var gotData any
	if err := yaml.Unmarshal(got, &gotData); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(gotData)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("the release's KnativeEventing patch:\n got %s\nwant %s", gj, wj)
	}
}
