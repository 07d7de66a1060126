// Command credhelper is a docker-credential-* helper for tests. `get` reads a server URL
// on stdin and answers from creds.json beside the binary ({"<server>": {"Username": ...,
// "Secret": ...}}), or says it has none as helpers do; it appends each server URL asked
// about to calls.log beside the binary.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "get" {
		fmt.Fprintln(os.Stderr, "usage: docker-credential-<name> get")
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	dir := filepath.Dir(self)
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	server := strings.TrimSpace(string(in))
	log, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fail(err)
	}
	fmt.Fprintln(log, server)
	log.Close()
	data, err := os.ReadFile(filepath.Join(dir, "creds.json"))
	if err != nil {
		fail(err)
	}
	var creds map[string]struct{ Username, Secret string }
	if err := json.Unmarshal(data, &creds); err != nil {
		fail(err)
	}
	c, ok := creds[server]
	if !ok {
		fmt.Println("credentials not found in native keychain")
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{"ServerURL": server, "Username": c.Username, "Secret": c.Secret})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
