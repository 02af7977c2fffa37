// Package backup is the database example's stand-in for an external backup
// catalog (an object-store bucket with an index, a backup service's API): the
// operator records every backup Job that completed, and the records outlive
// the Database they were taken from — which is the point of a final backup.
// It lives in the operator's process so the demo needs nothing else; with a
// file ([Open]) its records also outlive the process, as a real catalog's do.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Reasons a backup is taken.
const (
	// ReasonPreUpgrade: taken in phase BackingUp, before a version change.
	ReasonPreUpgrade = "PreUpgrade"
	// ReasonFinal: taken in phase Deleting, before the Database goes.
	ReasonFinal = "Final"
)

// Backup is one completed backup.
type Backup struct {
	// ID is unique per Database: the name of the Job that took it.
	ID string
	// Database is the source, as namespace/name.
	Database string
	// UID is the source Database's UID, so that a Database re-created under
	// the same name is told apart.
	UID string
	// Version is the database version the data was dumped from.
	Version string
	// Reason is ReasonPreUpgrade or ReasonFinal.
	Reason string
	// CompletedAt is when the backup finished.
	CompletedAt time.Time
}

// Catalog is a concurrency-safe record of completed backups.
type Catalog struct {
	mu      sync.Mutex
	backups []Backup
	path    string // "" for a catalog in memory only
}

// New returns an empty catalog, in memory only.
func New() *Catalog { return &Catalog{} }

// Open returns the catalog kept in the JSON file at path, loading the
// records already there (a missing file is an empty catalog). Every
// [Catalog.Record] that adds a backup rewrites the file (a temporary file
// renamed over it) before it returns, so another process opening path
// later — the operator restarted after a crash — sees every backup this one
// recorded.
func Open(path string) (*Catalog, error) {
	c := &Catalog{path: path}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("backup catalog: %w", err)
	}
	if err := json.Unmarshal(data, &c.backups); err != nil {
		return nil, fmt.Errorf("backup catalog %s: %w", path, err)
	}
	return c, nil
}

// Record adds b. Recording a backup with the same Database, UID and ID again
// changes nothing and reports false, so callers may record on every
// reconcile that sees the backup finished. For a catalog from [Open], an
// error writing the file leaves b unrecorded (in memory too) and is returned.
func (c *Catalog) Record(_ context.Context, b Backup) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, have := range c.backups {
		if have.Database == b.Database && have.UID == b.UID && have.ID == b.ID {
			return false, nil
		}
	}
	next := append(slices.Clip(c.backups), b)
	if c.path != "" {
		if err := writeFile(c.path, next); err != nil {
			return false, fmt.Errorf("backup catalog: record %s of %s: %w", b.ID, b.Database, err)
		}
	}
	c.backups = next
	return true, nil
}

func writeFile(path string, backups []Backup) error {
	data, err := json.MarshalIndent(backups, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// List returns the backups of database (namespace/name), oldest first.
func (c *Catalog) List(database string) []Backup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Backup
	for _, b := range c.backups {
		if b.Database == database {
			out = append(out, b)
		}
	}
	return out
}

// Find returns the backup of database with the given reason and UID, if any.
func (c *Catalog) Find(database, uid, reason string) (Backup, bool) {
	bs := c.List(database)
	i := slices.IndexFunc(bs, func(b Backup) bool { return b.UID == uid && b.Reason == reason })
	if i < 0 {
		return Backup{}, false
	}
	return bs[i], true
}

// Len returns how many backups are recorded.
func (c *Catalog) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.backups)
}
