// Command credprovider is a kubelet credential provider plugin for tests. It reads a
// CredentialProviderRequest on stdin, appends its image to the file $STUB_LOG and answers
// the credentials --user and $STUB_PASSWORD for the request's registry, cached by
// registry for $STUB_CACHE_DURATION (unset: the config's default).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	user := flag.String("user", "", "username to answer")
	flag.Parse()
	var req struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Image      string `json:"image"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil || req.Kind != "CredentialProviderRequest" {
		fmt.Fprintf(os.Stderr, "bad request: %v %q\n", err, req.Kind)
		os.Exit(1)
	}
	log, err := os.OpenFile(os.Getenv("STUB_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(log, req.Image)
	log.Close()
	registry, _, _ := strings.Cut(req.Image, "/")
	resp := map[string]any{
		"apiVersion":   req.APIVersion,
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": "Registry",
		"auth": map[string]any{
			registry: map[string]string{"username": *user, "password": os.Getenv("STUB_PASSWORD")},
		},
	}
	if d := os.Getenv("STUB_CACHE_DURATION"); d != "" {
		resp["cacheDuration"] = d
	}
	json.NewEncoder(os.Stdout).Encode(resp)
}
