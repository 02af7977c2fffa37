package registry

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Two registries on one journal — two processes, or a process and the one
// that replaced it — see each other's registrations and releases.
func TestOpenSharesTheJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "routes")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	a.Register(ctx, "ns/one", "http://one")
	a.Register(ctx, "ns/two", "http://two")
	a.Register(ctx, "ns/two", "http://two") // no-op
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if got, ok := b.Lookup("ns/one"); !ok || got != "http://one" {
		t.Fatalf("b.Lookup(ns/one) = %q, %v; want http://one", got, ok)
	}
	if !b.Release(ctx, "ns/one") {
		t.Fatal("b.Release(ns/one) = false")
	}
	b.Register(ctx, "ns/three", "http://three")
	if _, ok := a.Lookup("ns/one"); ok {
		t.Error("a still sees the route b released")
	}
	if got, ok := a.Lookup("ns/three"); !ok || got != "http://three" {
		t.Errorf("a.Lookup(ns/three) = %q, %v; want http://three", got, ok)
	}
	if a.Len() != 2 || b.Len() != 2 {
		t.Errorf("Len: a %d, b %d; want 2, 2", a.Len(), b.Len())
	}
	if !a.Release(ctx, "ns/never") {
		t.Error("releasing a key never registered must report it gone")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := 4 // one, two, release one, three
	if b, _ := os.ReadFile(path); countLines(b) != lines {
		t.Errorf("journal has %d lines (%d bytes), want %d: a no-op wrote", countLines(b), st.Size(), lines)
	}
}

// A writer killed mid-line leaves an incomplete last line: readers ignore
// it, and the next writer cuts it off before appending.
func TestOpenIgnoresAnIncompleteLine(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "routes")
	if err := os.WriteFile(path, []byte(`{"k":"ns/one","u":"http://one"}`+"\n"+`{"k":"ns/tw`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if r.Len() != 1 {
		t.Fatalf("Len %d, want 1 (the incomplete line ignored)", r.Len())
	}
	r.Register(ctx, "ns/two", "http://two")
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Close() }()
	if again.Len() != 2 || again.Err() != nil {
		t.Fatalf("reopened: Len %d, Err %v; want 2, nil", again.Len(), again.Err())
	}
	if got, _ := again.Lookup("ns/two"); got != "http://two" {
		t.Errorf("ns/two = %q", got)
	}
}

// A journal that cannot be read fails closed: Release reports the route
// not gone, so a finalizer waits instead of losing it.
func TestOpenFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routes")
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil {
		t.Fatal("Open of a corrupt journal succeeded")
	}
	r, err := Open(filepath.Join(t.TempDir(), "ok"))
	if err != nil {
		t.Fatal(err)
	}
	r.Register(context.Background(), "ns/one", "http://one")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Release(context.Background(), "ns/one") {
		t.Error("Release after the journal closed reported the route gone")
	}
	if r.Err() == nil {
		t.Error("Err is nil after a journal error")
	}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
