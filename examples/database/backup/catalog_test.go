package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opkit/opkit/examples/database/backup"
)

// A catalog opened from a file sees what another opened from the same file
// recorded: the records outlive the process that made them.
func TestOpenedCatalogOutlivesTheProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.json")
	first, err := backup.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if first.Len() != 0 {
		t.Fatalf("a missing file opened with %d records", first.Len())
	}
	b := backup.Backup{ID: "db-backup-final", Database: "ns/db", UID: "u1", Version: "v1", Reason: backup.ReasonFinal, CompletedAt: time.Unix(100, 0).UTC()}
	if added, err := first.Record(ctx, b); !added || err != nil {
		t.Fatalf("Record: added %v, %v", added, err)
	}
	second, err := backup.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := second.Find("ns/db", "u1", backup.ReasonFinal)
	if !ok || got != b {
		t.Fatalf("reopened: %+v (found %v), want %+v", got, ok, b)
	}
	if added, err := second.Record(ctx, b); added || err != nil {
		t.Fatalf("recording it again: added %v, %v; want false, nil", added, err)
	}
	if second.Len() != 1 {
		t.Fatalf("%d records, want 1", second.Len())
	}
}

func TestRecordReportsAWriteErrorAndKeepsNothing(t *testing.T) {
	dir := t.TempDir()
	c, err := backup.Open(filepath.Join(dir, "missing-dir", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	added, err := c.Record(context.Background(), backup.Backup{ID: "x", Database: "ns/db", UID: "u", Reason: backup.ReasonFinal})
	if added || err == nil || !strings.Contains(err.Error(), "ns/db") {
		t.Fatalf("Record into a missing directory: added %v, err %v; want false and an error naming ns/db", added, err)
	}
	if c.Len() != 0 {
		t.Fatalf("%d records kept after a failed write", c.Len())
	}
}

func TestOpenRejectsAMalformedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Open(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a malformed file: %v, want an error naming the file", err)
	}
}
