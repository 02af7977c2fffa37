// Package playbooks holds the playbook example's Ansible content: the
// watches.yaml mapping Site to its playbooks, site.yml (reconcile) and
// site-finalizer.yml (deletion). They are embedded so that the operator
// binary carries them; [Extract] writes them where ansible-playbook can read
// them.
package playbooks

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed watches.yaml *.yml
var files embed.FS

// Extract writes the embedded files into dir and returns the path of
// watches.yaml there (for ansible.LoadWatches).
func Extract(dir string) (string, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600); err != nil {
			return "", fmt.Errorf("playbooks: %w", err)
		}
	}
	return filepath.Join(dir, "watches.yaml"), nil
}
