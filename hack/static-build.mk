# How the test tools and the cluster's programs are built: static, without
# this machine's paths, without symbol tables. Static and -trimpath are
# also the release's flags (hack/release.sh), vet's (make lint) and those
# of the binaries the integration tests build without the race detector
# (test/testproc's GoBuild), so a package two of them share, at one
# version, is compiled once; the images and the node's containerd hold
# less without the symbols. Every build below lists this file in its
# content stamp: a change here rebuilds them.
STATIC_BUILD_MK := hack/static-build.mk
STATIC_GO_BUILD = CGO_ENABLED=0 $(GO) build -trimpath
STATIC_LDFLAGS := -s -w
