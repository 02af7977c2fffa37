package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/examples/bucket/config"
	"github.com/opkit/opkit/examples/bucket/controller"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

const (
	// DemoNamespace is where the embedded demo applies the sample Buckets.
	DemoNamespace = "demo"
	// DemoCredentials is the credentials Secret the samples reference.
	DemoCredentials = "cloud-credentials" //nolint:gosec // a Secret's name, not a credential
	// Environment variables holding the cloud account for --cloud-only, and for
	// the embedded demo's credentials Secret with --cloud-endpoint.
	envAccessKey = "CLOUD_ACCESS_KEY_ID"
	envSecretKey = "CLOUD_SECRET_ACCESS_KEY"
)

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(storagev1.AddToScheme) }

// fakeCloud is the fake cloud the demo runs in-process.
type fakeCloud struct {
	server   *cloud.Server
	endpoint string
	creds    cloud.Credentials
	stateDir string // removed on stop when the demo made it
}

// startCloud starts the fake cloud on o.cloudListen with one account, taken
// from the environment or generated.
func startCloud(o options) (*fakeCloud, error) {
	fc := &fakeCloud{creds: cloud.Credentials{AccessKeyID: os.Getenv(envAccessKey), SecretAccessKey: os.Getenv(envSecretKey)}}
	if fc.creds.AccessKeyID == "" || fc.creds.SecretAccessKey == "" {
		fc.creds = cloud.Credentials{AccessKeyID: "AKDEMO" + randomHex(4), SecretAccessKey: randomHex(20)}
	}
	state := o.cloudState
	if state == "" {
		dir, err := os.MkdirTemp("", "opkit-bucket-cloud-")
		if err != nil {
			return nil, err
		}
		fc.stateDir, state = dir, filepath.Join(dir, "state.json")
	}
	srv, err := cloud.NewServer(
		cloud.WithAccount(fc.creds.AccessKeyID, fc.creds.SecretAccessKey),
		cloud.WithStateFile(state),
		cloud.WithMaxBuckets(10),
		cloud.WithRateLimit(20, 40),
		cloud.WithDeleteDelay(time.Second),
	)
	if err != nil {
		fc.stop()
		return nil, err
	}
	fc.server = srv
	if fc.endpoint, err = srv.Start(o.cloudListen); err != nil {
		fc.stop()
		return nil, err
	}
	say("fake cloud API on %s (state: %s; 20 calls/s per client, quota 10 buckets, deletes take 1s)", fc.endpoint, state)
	return fc, nil
}

func (fc *fakeCloud) stop() {
	if fc.server != nil {
		_ = fc.server.Close()
	}
	if fc.stateDir != "" {
		_ = os.RemoveAll(fc.stateDir)
	}
}

// serveCloud runs only the fake cloud, for an operator elsewhere.
func serveCloud(ctx context.Context, o options) error {
	if o.cloudState == "" {
		o.cloudState = "bucket-cloud-state.json"
	}
	fc, err := startCloud(o)
	if err != nil {
		return err
	}
	defer fc.stop()
	say("account: access key %s; secret key from $%s, or generated: %s", fc.creds.AccessKeyID, envSecretKey, fc.creds.SecretAccessKey)
	say("inject faults:  curl -XPOST %s/admin/faults -d '{\"failNext\":3}'   (or throttleNext, slowNext+slowFor, latency)", fc.endpoint)
	<-ctx.Done()
	return ctx.Err()
}

func run(ctx context.Context, o options) error {
	cfg, err := o.ClusterConfig()
	if err != nil {
		return err
	}
	embedded := cfg == nil
	closeLog, err := o.SetLogger(narrator, embedded)
	if err != nil {
		return err
	}
	defer closeLog()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	var defaults types.NamespacedName
	if o.credentialsSecret != "" {
		ns, name, ok := strings.Cut(o.credentialsSecret, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--credentials-secret %q: want namespace/name", o.credentialsSecret)
		}
		defaults = types.NamespacedName{Namespace: ns, Name: name}
	}

	var fc *fakeCloud
	endpoint, creds := o.cloudEndpoint, cloud.Credentials{AccessKeyID: os.Getenv(envAccessKey), SecretAccessKey: os.Getenv(envSecretKey)}
	switch {
	case endpoint == "" && !embedded:
		return errors.New("--cloud-endpoint is required on a cluster (start a fake cloud with --cloud-only)")
	case endpoint == "":
		if fc, err = startCloud(o); err != nil {
			return err
		}
		defer fc.stop()
		endpoint, creds = fc.endpoint, fc.creds
	case embedded && (creds.AccessKeyID == "" || creds.SecretAccessKey == ""):
		return fmt.Errorf("with --cloud-endpoint, the demo needs the account in $%s and $%s", envAccessKey, envSecretKey)
	}

	var env *testenv.Env
	if embedded {
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		var stop func()
		env, stop, err = narrator.StartControlPlane("etcd, kube-apiserver", testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
		if err != nil {
			return err
		}
		defer stop()
		cfg = env.Config
		if o.resync == 0 {
			o.resync = 3 * time.Second
		}
	}
	o.DefaultAddrs(embedded)

	mopts := o.ManagerOptions(scheme, "bucket-operator.storage.example.com")
	mopts.Cache.ByObject = controller.CacheByObject()
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	// One limiter for both controllers: the cloud's rate limit is the
	// account's, whichever kind of resource the calls are about.
	copts := controller.Options{CloudEndpoint: endpoint, DefaultCredentials: defaults, Observability: obs, ResyncInterval: o.resync,
		Limiter: external.NewLimiter(15, 30)}
	if embedded {
		copts.DeletePollInterval = 300 * time.Millisecond
	}
	if err := controller.Setup(mgr, copts); err != nil {
		return err
	}
	if err := controller.SetupQueues(mgr, copts); err != nil {
		return err
	}

	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()
	d := &demo{c: env.Client, errc: bg.Err(), creds: creds, endpoint: endpoint}
	if o.ExitWhenReady {
		d.deadline = time.Now().Add(o.Timeout)
	}
	if err := d.apply(ctx); err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	if err := narrator.SayEndpoints(ctx, env, &o.Flags, DemoNamespace, kubectl); err != nil {
		return err
	}
	say("watch it:  %s get buckets,secrets -n %s", kubectl, DemoNamespace)
	say("events:    %s events -n %s", kubectl, DemoNamespace)

	if err := d.steps(ctx, o.resync); err != nil {
		return err
	}
	if o.ExitWhenReady {
		say("every step done; exiting as asked")
		bg.Stop()
		return nil
	}
	if fc != nil {
		say("the operator keeps running. Break the cloud and watch it cope:")
		say("  curl -XPOST %s/admin/faults -d '{\"failNext\":5}'                       # 503s: backoff", fc.endpoint)
		say("  curl -XPOST %s/admin/faults -d '{\"throttleNext\":1,\"retryAfterSeconds\":5}' # 429: waits Retry-After", fc.endpoint)
	}
	select {
	case err := <-bg.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// demo drives the embedded demo against env's API server.
type demo struct {
	c        client.Client
	errc     <-chan error
	deadline time.Time // zero: none
	creds    cloud.Credentials
	endpoint string
	last     string
}

func (d *demo) apply(ctx context.Context) error {
	if err := examplecmd.EnsureNamespace(ctx, d.c, DemoNamespace); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: DemoCredentials},
		Data: map[string][]byte{
			controller.CredentialsAccessKeyID:     []byte(d.creds.AccessKeyID),
			controller.CredentialsSecretAccessKey: []byte(d.creds.SecretAccessKey),
		},
	}
	if err := d.c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	say("applied Secret %s/%s with the cloud account's keys", DemoNamespace, DemoCredentials)
	samples, err := config.Samples()
	if err != nil {
		return err
	}
	_, err = narrator.ApplySamples(ctx, d.c, DemoNamespace, samples)
	return err
}

// steps: every sample Ready; drift made in the cloud corrected; a deletion
// that removes the cloud bucket before the Bucket.
func (d *demo) steps(ctx context.Context, resync time.Duration) error {
	if err := d.wait(ctx, "every sample Bucket Ready", d.allReady); err != nil {
		return err
	}
	cl, err := cloud.NewClient(d.endpoint, d.creds)
	if err != nil {
		return err
	}
	assets := &storagev1.Bucket{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "assets"}, assets); err != nil {
		return err
	}
	off := false
	if _, err := cl.Update(ctx, assets.Status.ExternalName, cloud.UpdateRequest{Versioning: &off}); err != nil {
		return err
	}
	say("drift: versioning of cloud bucket %s switched OFF directly in the cloud; the operator looks every %s…", assets.Status.ExternalName, resync)
	var corrected string
	if err := d.wait(ctx, "the drift corrected", func(ctx context.Context) (string, bool, error) {
		b, err := cl.Get(ctx, assets.Status.ExternalName)
		if err != nil || !b.Versioning {
			return "", false, err
		}
		corrected, err = findEvent(ctx, d.c, "assets", string(controller.ReasonDriftCorrected))
		return "", corrected != "", err
	}); err != nil {
		return err
	}
	say("event DriftCorrected: %s", corrected)

	logs := &storagev1.Bucket{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "logs"}, logs); err != nil {
		return err
	}
	if err := d.c.Delete(ctx, logs); err != nil {
		return err
	}
	say("deleted Bucket %s/logs; its finalizer deletes cloud bucket %s and waits for a 404", DemoNamespace, logs.Status.ExternalName)
	if err := d.wait(ctx, "Bucket logs gone", func(ctx context.Context) (string, bool, error) {
		err := d.c.Get(ctx, client.ObjectKeyFromObject(logs), &storagev1.Bucket{})
		if !apierrors.IsNotFound(err) {
			return "", false, err
		}
		switch _, err := cl.Get(ctx, logs.Status.ExternalName); {
		case err == nil:
			return "", false, errors.New("the Bucket is gone but its cloud bucket is not")
		case !cloud.IsNotFound(err):
			return "", false, err
		}
		return "", true, nil
	}); err != nil {
		return err
	}
	left, err := cl.List(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(left))
	for _, b := range left {
		names = append(names, fmt.Sprintf("%s(versioning=%t)", b.Name, b.Versioning))
	}
	say("Bucket logs and cloud bucket %s are gone; the cloud now holds: %s", logs.Status.ExternalName, strings.Join(names, " "))
	return nil
}

// wait polls check every 500ms, printing its report when it changes, until
// it is done, the manager stops, ctx ends or the deadline passes.
func (d *demo) wait(ctx context.Context, what string, check func(context.Context) (string, bool, error)) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		report, done, err := check(ctx)
		if report != "" && report != d.last {
			fmt.Print(report)
			d.last = report
		}
		if done {
			return nil
		}
		lastErr = err
		if !d.deadline.IsZero() && time.Now().After(d.deadline) {
			if lastErr != nil {
				return fmt.Errorf("demo: %s: not reached in time (last error: %w)", what, lastErr)
			}
			return fmt.Errorf("demo: %s: not reached in time", what)
		}
		select {
		case err := <-d.errc:
			return fmt.Errorf("manager stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// allReady renders one line per Bucket and says whether all are Ready for their current generation.
func (d *demo) allReady(ctx context.Context) (string, bool, error) {
	var list storagev1.BucketList
	if err := d.c.List(ctx, &list, client.InNamespace(DemoNamespace)); err != nil {
		return "", false, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var b strings.Builder
	all := len(list.Items) > 0
	for i := range list.Items {
		bk := &list.Items[i]
		state, reason := "Unknown", "NotYetReported"
		if ready := conditions.Get(bk, conditions.Ready); ready != nil {
			state, reason = string(ready.Status), ready.Reason
		}
		all = all && conditions.IsTrue(bk, conditions.Ready) && bk.Status.ObservedGeneration == bk.Generation
		fmt.Fprintf(&b, "  bucket %-8s external=%-24s Ready=%s (%s)\n", bk.Name, bk.Status.ExternalName, state, reason)
	}
	return b.String(), all, nil
}

// findEvent returns the note of an Event with reason on the Bucket named name, or "".
func findEvent(ctx context.Context, c client.Client, name, reason string) (string, error) {
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(DemoNamespace)); err != nil {
		return "", err
	}
	for _, e := range events.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Regarding.Kind == "Bucket" {
			return e.Note, nil
		}
	}
	return "", nil
}

func say(format string, args ...any) { narrator.Say(format, args...) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return strings.ToUpper(hex.EncodeToString(b))
}
