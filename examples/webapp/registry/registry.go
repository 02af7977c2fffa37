// Package registry is the webapp example's stand-in for an external system an
// operator must clean up after: a route registry that maps each WebApp to its
// URL. It lives in the operator's process so the demo needs nothing else; a
// real operator would call a DNS provider or a load balancer API here.
package registry

import (
	"context"
	"sync"
)

// Registry is a concurrency-safe map from WebApp key to URL.
type Registry struct {
	mu     sync.Mutex
	routes map[string]string
}

// New returns an empty registry.
func New() *Registry { return &Registry{routes: map[string]string{}} }

// Register records url for key. Registering the same pair again is a no-op.
func (r *Registry) Register(_ context.Context, key, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[key] = url
}

// Release removes key and reports whether it is gone afterwards (always true
// here; an external system may answer "still deleting").
func (r *Registry) Release(_ context.Context, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.routes, key)
	_, still := r.routes[key]
	return !still
}

// Lookup returns the URL registered for key.
func (r *Registry) Lookup(key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	url, ok := r.routes[key]
	return url, ok
}

// Len returns how many routes are registered.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.routes)
}
