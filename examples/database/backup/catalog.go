// Package backup is the database example's stand-in for an external backup
// catalog (an object-store bucket with an index, a backup service's API): the
// operator records every backup Job that completed, and the records outlive
// the Database they were taken from — which is the point of a final backup.
// It lives in the operator's process so the demo needs nothing else.
package backup

import (
	"context"
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
}

// New returns an empty catalog.
func New() *Catalog { return &Catalog{} }

// Record adds b. Recording a backup with the same Database, UID and ID again
// changes nothing and reports false, so callers may record on every
// reconcile that sees the backup finished.
func (c *Catalog) Record(_ context.Context, b Backup) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, have := range c.backups {
		if have.Database == b.Database && have.UID == b.UID && have.ID == b.ID {
			return false
		}
	}
	c.backups = append(c.backups, b)
	return true
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
