package ansible

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Watch maps one custom resource kind to the playbook (or role) that
// reconciles it, as one entry of operator-sdk's watches.yaml does.
type Watch struct {
	// GVK is the kind reconciled. Its group and kind name the variable that
	// holds the whole object (see [Runner.Vars]).
	GVK schema.GroupVersionKind
	// Playbook is the path of the playbook run on every reconcile of a live
	// object. Exactly one of Playbook and Role is set.
	Playbook string
	// Role is a role run on every reconcile of a live object: a role name
	// found on Ansible's roles path, or a path to the role's directory (its
	// parent directory is then put first on ANSIBLE_ROLES_PATH). The runner
	// generates a one-play playbook for it (hosts: localhost, no facts).
	Role string
	// Vars are extra variables given to every run of this kind, under the
	// object's own variables (a spec field of the same name wins).
	Vars map[string]any
	// Finalizer, when set, is run when the object is deleted; see
	// [Runner.Finalize].
	Finalizer *Finalizer
	// MaxConcurrent bounds how many ansible-playbook processes run at once
	// for this kind (reconciles and finalizers together); a run beyond it
	// waits for a slot. Zero means [DefaultMaxConcurrent].
	MaxConcurrent int
	// Timeout bounds one run (not the wait for a slot). A run still going at
	// the timeout is killed with its whole process group and reported as
	// failed with reason [ReasonTimeout]. Zero means [DefaultTimeout].
	Timeout time.Duration
	// KeepCamelCase passes spec fields with their names as written
	// (operator-sdk's snakeCaseParameters: false) instead of snake_case.
	KeepCamelCase bool
}

// Finalizer is the playbook or role run when an object of a [Watch]'s kind
// is deleted.
type Finalizer struct {
	// Name is the finalizer put on the object (e.g.
	// "cache.example.com/finalizer"); required.
	Name string
	// Playbook or Role: exactly one, with the meaning of [Watch.Playbook]
	// and [Watch.Role].
	Playbook string
	Role     string
	// Vars are extra variables for the finalizer run only, over the
	// watch's.
	Vars map[string]any
}

// DefaultMaxConcurrent is the number of runs of one kind allowed at once
// when [Watch.MaxConcurrent] is zero.
const DefaultMaxConcurrent = 2

// DefaultTimeout bounds one run when [Watch.Timeout] is zero.
const DefaultTimeout = 10 * time.Minute

// validate checks w and fills its defaults.
func (w *Watch) validate() error {
	if w.GVK.Kind == "" || w.GVK.Version == "" {
		return errors.New("ansible: watch needs a version and a kind")
	}
	if (w.Playbook == "") == (w.Role == "") {
		return fmt.Errorf("ansible: watch %s: exactly one of playbook and role must be set", w.GVK)
	}
	if w.Finalizer != nil {
		if w.Finalizer.Name == "" {
			return fmt.Errorf("ansible: watch %s: finalizer needs a name", w.GVK)
		}
		if (w.Finalizer.Playbook == "") == (w.Finalizer.Role == "") {
			return fmt.Errorf("ansible: watch %s: finalizer %s: exactly one of playbook and role must be set", w.GVK, w.Finalizer.Name)
		}
	}
	if w.MaxConcurrent < 0 || w.Timeout < 0 {
		return fmt.Errorf("ansible: watch %s: negative maxConcurrent or timeout", w.GVK)
	}
	if w.MaxConcurrent == 0 {
		w.MaxConcurrent = DefaultMaxConcurrent
	}
	if w.Timeout == 0 {
		w.Timeout = DefaultTimeout
	}
	for _, p := range []string{w.Playbook, finalizerPlaybook(w.Finalizer)} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("ansible: watch %s: playbook: %w", w.GVK, err)
		}
	}
	return nil
}

func finalizerPlaybook(f *Finalizer) string {
	if f == nil {
		return ""
	}
	return f.Playbook
}

// watchFile is one entry of a watches.yaml file.
type watchFile struct {
	Group                   string         `json:"group"`
	Version                 string         `json:"version"`
	Kind                    string         `json:"kind"`
	Playbook                string         `json:"playbook,omitempty"`
	Role                    string         `json:"role,omitempty"`
	Vars                    map[string]any `json:"vars,omitempty"`
	MaxConcurrentReconciles int            `json:"maxConcurrentReconciles,omitempty"`
	Timeout                 string         `json:"timeout,omitempty"`
	SnakeCaseParameters     *bool          `json:"snakeCaseParameters,omitempty"`
	Finalizer               *struct {
		Name     string         `json:"name"`
		Playbook string         `json:"playbook,omitempty"`
		Role     string         `json:"role,omitempty"`
		Vars     map[string]any `json:"vars,omitempty"`
	} `json:"finalizer,omitempty"`
}

// LoadWatches reads a watches.yaml file in operator-sdk's format, limited to
// the fields this package implements: group, version, kind, playbook, role,
// vars, finalizer (name, playbook, role, vars), maxConcurrentReconciles
// (→ [Watch.MaxConcurrent]), snakeCaseParameters (false → [Watch.KeepCamelCase])
// and opkit's own timeout (a Go duration, "90s"). Any other field is an
// error naming it, so that a file written for operator-sdk
// (reconcilePeriod, manageStatus, watchDependentResources, blacklist, …) is
// refused rather than half-honoured. Relative playbook and role paths are
// resolved against the file's directory. The watches are validated as by
// [New].
func LoadWatches(path string) ([]Watch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ansible: %w", err)
	}
	var entries []watchFile
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		return nil, fmt.Errorf("ansible: %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	role := func(r string) string {
		if r == "" || filepath.IsAbs(r) {
			return r
		}
		if _, err := os.Stat(filepath.Join(dir, r)); err == nil {
			return filepath.Join(dir, r)
		}
		return r // a role name found on the roles path
	}
	out := make([]Watch, 0, len(entries))
	for i, e := range entries {
		w := Watch{
			GVK:      schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind},
			Playbook: abs(e.Playbook), Role: role(e.Role), Vars: e.Vars,
			MaxConcurrent: e.MaxConcurrentReconciles,
			KeepCamelCase: e.SnakeCaseParameters != nil && !*e.SnakeCaseParameters,
		}
		if e.Timeout != "" {
			if w.Timeout, err = time.ParseDuration(e.Timeout); err != nil {
				return nil, fmt.Errorf("ansible: %s: entry %d: timeout: %w", path, i, err)
			}
		}
		if f := e.Finalizer; f != nil {
			w.Finalizer = &Finalizer{Name: f.Name, Playbook: abs(f.Playbook), Role: role(f.Role), Vars: f.Vars}
		}
		if err := w.validate(); err != nil {
			return nil, fmt.Errorf("%w (%s, entry %d)", err, path, i)
		}
		out = append(out, w)
	}
	return out, nil
}
