package assets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func writeFakeBinaries(t *testing.T, dir string, bins ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(bins) == 0 {
		bins = All
	}
	for _, b := range bins {
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

func TestFindLooksOnlyForTheBinariesAskedFor(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	opts := Options{CacheDir: t.TempDir(), Binaries: Plain}
	dir, err := Dir(opts)
	if err != nil {
		t.Fatal(err)
	}
	writeFakeBinaries(t, dir, Plain...)
	if got, err := Find(opts); err != nil || got != dir {
		t.Fatalf("Find(Plain) = %q, %v; want %q", got, err, dir)
	}
	opts.Binaries = Workloads
	_, err = Find(opts)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find(Workloads) with only Plain built: want ErrNotFound, got %v", err)
	}
	// The error names what is missing and the command that builds exactly the mode's binaries.
	for _, want := range []string{"kube-controller-manager, kube-scheduler, kwok not in", BuildCommand + " -binaries etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kwok"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := Find(Options{CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), strconv.Quote(BuildCommand)) {
		t.Errorf("Find(All): want the error to name %q alone, got %v", BuildCommand, err)
	}
}

func TestKubebuilderAssetsWithPlainBinariesServePlainMode(t *testing.T) {
	env := t.TempDir()
	writeFakeBinaries(t, env, Etcd, KubeAPIServer, Kubectl) // what setup-envtest installs
	t.Setenv("KUBEBUILDER_ASSETS", env)
	if got, err := Find(Options{CacheDir: t.TempDir(), Binaries: Plain}); err != nil || got != env {
		t.Fatalf("Find(Plain) = %q, %v; want %q", got, err, env)
	}
	if _, err := Find(Options{CacheDir: t.TempDir(), Binaries: GarbageCollector}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find(GarbageCollector): want ErrNotFound, got %v", err)
	}
}

func TestOptionsRejectUnknownBinariesAndOrderTheRest(t *testing.T) {
	if _, err := Find(Options{CacheDir: t.TempDir(), Binaries: []string{"kubelet"}}); err == nil || !strings.Contains(err.Error(), `unknown binary "kubelet"`) {
		t.Fatalf("want an unknown-binary error, got %v", err)
	}
	o, err := Options{Binaries: []string{Kubectl, Etcd, Kubectl}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Binaries, []string{Etcd, Kubectl}) {
		t.Fatalf("Binaries = %v, want [etcd kubectl]", o.Binaries)
	}
}

func TestModesNest(t *testing.T) {
	for i, mode := range [][]string{Plain, GarbageCollector, Workloads, All} {
		if i > 0 {
			prev := [][]string{Plain, GarbageCollector, Workloads, All}[i-1]
			for _, b := range prev {
				if !slices.Contains(mode, b) {
					t.Errorf("mode %v lacks %s of the smaller mode %v", mode, b, prev)
				}
			}
		}
		if slices.Contains(mode, Kubectl) != (i == 3) {
			t.Errorf("kubectl is built on demand, so only All holds it; mode %v", mode)
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := Ensure(ctx, opts)
	if err != nil || got != dir {
		t.Fatalf("Ensure = %q, %v", got, err)
	}
}

func TestVerifyRejectsWrongVersion(t *testing.T) {
	dir := t.TempDir()
	for _, b := range All {
		script := "#!/bin/sh\necho v0.0.1\n"
		if err := os.WriteFile(filepath.Join(dir, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := verify(context.Background(), dir, DefaultVersions(), All)
	if err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("want an error naming etcd, got %v", err)
	}
}
