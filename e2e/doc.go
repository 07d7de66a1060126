// Package e2e holds the end-to-end tests of the staticpod binary: TestMain builds it once,
// statically as `make build` does, and the tests run it as users do — `staticpod run` on a
// manifest directory, a manifest URL and the API socket, the commands against that daemon,
// `once`, `validate` — against a private containerd that internal/testenv starts, one
// namespace per test. A few tests run the runner in-process on a real containerdrt.Runtime
// to read the statuses it computes. It has no code outside its tests, and its tests use
// only the exported API of staticpod's packages, never package main.
package e2e
