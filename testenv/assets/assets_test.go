package assets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func writeFakeBinaries(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range Required {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindPrefersCompleteKubebuilderAssets(t *testing.T) {
	env := t.TempDir()
	writeFakeBinaries(t, env)
	t.Setenv("KUBEBUILDER_ASSETS", env)
	got, err := Find(Options{CacheDir: t.TempDir()})
	if err != nil || got != env {
		t.Fatalf("Find = %q, %v; want %q", got, err, env)
	}
	if _, err := Find(Options{CacheDir: t.TempDir(), IgnoreEnv: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("IgnoreEnv: want ErrNotFound, got %v", err)
	}
}

func TestFindIgnoresIncompleteKubebuilderAssets(t *testing.T) {
	env := t.TempDir()
	writeFakeBinaries(t, env)
	if err := os.Remove(filepath.Join(env, Kwok)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", env)
	_, err := Find(Options{CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	if !strings.Contains(err.Error(), BuildCommand) {
		t.Fatalf("error does not name the build command: %v", err)
	}
}

func TestFindNeedsCompletionMarker(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	opts := Options{CacheDir: t.TempDir()}
	dir, err := Dir(opts)
	if err != nil {
		t.Fatal(err)
	}
	writeFakeBinaries(t, dir) // as if a build crashed after the rename
	if _, err := Find(opts); !errors.Is(err, ErrNotFound) {
		t.Fatalf("directory without marker must not count: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, completeMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(opts); err != nil || got != dir {
		t.Fatalf("Find = %q, %v; want %q", got, err, dir)
	}
}

func TestDirNamesEveryVersion(t *testing.T) {
	dir, err := Dir(Options{CacheDir: "/c", Versions: Versions{Kubernetes: "v1.2.3", Etcd: "v3.4.5", Kwok: "v0.6.7"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/c/", "k8s-v1.2.3", "etcd-v3.4.5", "kwok-v0.6.7"} {
		if !strings.Contains(dir, want) {
			t.Errorf("Dir = %q lacks %q", dir, want)
		}
	}
}

func TestDefaultCacheDirFollowsXDG(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	dir, err := Dir(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, filepath.Join(xdg, "opkit", "controlplane")+"/") {
		t.Fatalf("Dir = %q, want under %s/opkit/controlplane", dir, xdg)
	}
}

func TestStagingVersion(t *testing.T) {
	if got, err := stagingVersion("v1.37.2"); err != nil || got != "v0.37.2" {
		t.Fatalf("stagingVersion = %q, %v", got, err)
	}
	if _, err := stagingVersion("1.37.2"); err == nil {
		t.Fatal("want an error for a version without v1. prefix")
	}
}

func TestLDFlagsStampBothVersionPackages(t *testing.T) {
	f := kubernetesLDFlags("v1.37.2")
	for _, want := range []string{
		"k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
		"k8s.io/component-base/version.gitVersion=v1.37.2",
		"k8s.io/component-base/version.gitMajor=1",
		"k8s.io/component-base/version.gitMinor=37",
		"k8s.io/component-base/version.gitTreeState=clean",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("ldflags lack %q: %s", want, f)
		}
	}
}

func TestLockSerialisesBuilders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := lockFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if maxInside != 1 {
		t.Fatalf("%d holders at once, want 1", maxInside)
	}
}

func TestEnsureReturnsCachedWithoutBuilding(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	opts := Options{CacheDir: t.TempDir()}
	dir, _ := Dir(opts)
	writeFakeBinaries(t, dir)
	if err := os.WriteFile(filepath.Join(dir, completeMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := Ensure(ctx, opts)
	if err != nil || got != dir {
		t.Fatalf("Ensure = %q, %v", got, err)
	}
}

func TestVerifyRejectsWrongVersion(t *testing.T) {
	dir := t.TempDir()
	for _, b := range Required {
		script := "#!/bin/sh\necho v0.0.1\n"
		if err := os.WriteFile(filepath.Join(dir, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := verify(context.Background(), dir, DefaultVersions())
	if err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("want an error naming etcd, got %v", err)
	}
}
