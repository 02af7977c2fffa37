// Package registry is the webapp example's stand-in for an external system an
// operator must clean up after: a route registry that maps each WebApp to its
// URL. By default ([New]) it lives in the operator's process so the demo
// needs nothing else; [Open] keeps it in a file instead, so it outlives the
// process as an external system would (a test that kills the operator with
// SIGKILL can still count its routes). A real operator would call a DNS
// provider or a load balancer API here.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Registry is a concurrency-safe map from WebApp key to URL.
type Registry struct {
	mu     sync.Mutex
	routes map[string]string
	// journal, when set, holds every change as one JSON line; the map is
	// what the lines up to off say.
	journal *os.File
	off     int64
	err     error // the first journal error; the registry fails closed after it
}

// entry is one journal line: a registration (URL set) or a release.
type entry struct {
	Key string `json:"k"`
	URL string `json:"u,omitempty"`
}

// New returns an empty registry held in memory.
func New() *Registry { return &Registry{routes: map[string]string{}} }

// Open returns a registry kept in the journal file at path (created if
// missing): every Register that changes a route and every Release of a
// registered key appends one line, written with a single write call, and
// every call first reads the lines other processes appended since. So
// registries opened on the same file in several processes see each other's
// changes, as clients of one external system do, and a process killed with
// SIGKILL loses none of its acknowledged changes. Any number of processes may
// read; one at a time may write (the operator's leader election ensures it):
// a line left incomplete by a writer that died mid-write is ignored, and cut
// off by the next writer before it appends. After a journal error every
// Register and Release reports failure ([Registry.Err] says why): Release
// returns false, so a finalizer keeps waiting rather than losing a route.
func Open(path string) (*Registry, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("route registry: %w", err)
	}
	r := &Registry{routes: map[string]string{}, journal: f}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.syncLocked(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return r, nil
}

// Close closes the journal of a registry from [Open]; the registry must not
// be used afterwards. It does nothing for a registry from [New].
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.journal == nil {
		return nil
	}
	return r.journal.Close()
}

// Err returns the first journal error, nil for a registry from [New].
func (r *Registry) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// syncLocked applies the complete journal lines past off.
func (r *Registry) syncLocked() error {
	if r.journal == nil || r.err != nil {
		return r.err
	}
	b, err := io.ReadAll(io.NewSectionReader(r.journal, r.off, 1<<62))
	if err != nil {
		r.err = fmt.Errorf("route registry: read: %w", err)
		return r.err
	}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil // none, or an incomplete last line
		}
		var e entry
		if err := json.Unmarshal(b[:i], &e); err != nil {
			r.err = fmt.Errorf("route registry: line at byte %d: %w", r.off, err)
			return r.err
		}
		if e.URL == "" {
			delete(r.routes, e.Key)
		} else {
			r.routes[e.Key] = e.URL
		}
		r.off += int64(i + 1)
		b = b[i+1:]
	}
}

// appendLocked writes e to the journal after the complete lines (cutting off
// an incomplete one) and applies it.
func (r *Registry) appendLocked(e entry) bool {
	if r.journal != nil {
		line, err := json.Marshal(e)
		if err == nil {
			err = r.journal.Truncate(r.off)
		}
		if err == nil {
			_, err = r.journal.WriteAt(append(line, '\n'), r.off)
		}
		if err != nil {
			r.err = fmt.Errorf("route registry: write: %w", err)
			return false
		}
		r.off += int64(len(line) + 1)
	}
	if e.URL == "" {
		delete(r.routes, e.Key)
	} else {
		r.routes[e.Key] = e.URL
	}
	return true
}

// Register records url for key. Registering the same pair again is a no-op
// (nothing is written). url must not be empty: an empty url releases key.
func (r *Registry) Register(_ context.Context, key, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.syncLocked() != nil || r.routes[key] == url {
		return
	}
	r.appendLocked(entry{Key: key, URL: url})
}

// Release removes key and reports whether it is gone afterwards: true once
// removed (or never registered); false only after a journal error.
func (r *Registry) Release(_ context.Context, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.syncLocked() != nil {
		return false
	}
	if _, ok := r.routes[key]; !ok {
		return true
	}
	return r.appendLocked(entry{Key: key})
}

// Lookup returns the URL registered for key (with [Open]: as the journal
// says now, whoever wrote it).
func (r *Registry) Lookup(key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.syncLocked()
	url, ok := r.routes[key]
	return url, ok
}

// Len returns how many routes are registered (with [Open]: as the journal
// says now).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.syncLocked()
	return len(r.routes)
}
