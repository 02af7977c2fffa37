package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/examples/bucket/config"
	"github.com/opkit/opkit/examples/bucket/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

const credsSecret = "cloud-credentials"

// fixture is one test's namespace and fake cloud, with the credentials
// Secret the Buckets reference.
type fixture struct {
	ns    string
	cloud *cloud.Server
	url   string
	creds cloud.Credentials
}

func newFixture(t *testing.T, opts ...cloud.Option) *fixture {
	t.Helper()
	f := &fixture{ns: env.Namespace(t), creds: cloud.Credentials{AccessKeyID: "AK" + strings.ToUpper(randomHex(4)), SecretAccessKey: "sk-" + randomHex(16)}}
	srv, err := cloud.NewServer(append([]cloud.Option{cloud.WithAccount(f.creds.AccessKeyID, f.creds.SecretAccessKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if f.url, err = srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	f.cloud = srv
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: credsSecret},
		Data: map[string][]byte{
			controller.CredentialsAccessKeyID:     []byte(f.creds.AccessKeyID),
			controller.CredentialsSecretAccessKey: []byte(f.creds.SecretAccessKey),
		},
	}
	if err := env.Client.Create(e2etest.Context(t, time.Minute), secret); err != nil {
		t.Fatal(err)
	}
	return f
}

// client is a cloud client of the fixture's account, for changes "made in the
// cloud console"; it has its own Retry-After gate.
func (f *fixture) client(t *testing.T) *cloud.Client {
	t.Helper()
	c, err := cloud.NewClient(f.url, f.creds)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type operator struct {
	requests *testenv.RequestCounter
	stop     func()
}

// startOperator runs the bucket operator against f's cloud with cfg (the
// admin by default) until stop or the end of the test, watching only f's
// namespace. Resync is 1s so drift tests stay short.
func startOperator(t *testing.T, f *fixture, cfg *rest.Config, mutate func(*controller.Options)) *operator {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	mgr := e2etest.NewManager(t, cfg, env.Scheme, f.ns, func(o *manager.Options) { o.Cache.ByObject = controller.CacheByObject() })
	o := controller.Options{
		CloudEndpoint: f.url, Observability: mgr.Observability,
		ResyncInterval: time.Second, CallTimeout: 2 * time.Second, DeletePollInterval: 200 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&o)
	}
	if err := controller.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	return &operator{requests: mgr.Requests, stop: mgr.Run(t)}
}

func newBucket(ns, name string) *storagev1.Bucket {
	return &storagev1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: storagev1.BucketSpec{
			Region: "eu-west-1", Versioning: true, QuotaClass: cloud.QuotaStandard,
			CredentialsSecretRef: &storagev1.SecretReference{Name: credsSecret},
		},
	}
}

// waitFor polls every 50ms, twice as often as e2etest.WaitFor, as these
// tests always have: several watch short windows (a 2s Retry-After, the
// second of quiet settle waits for).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	e2etest.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

func waitReady(t *testing.T, b *storagev1.Bucket) {
	t.Helper()
	ctx := e2etest.Context(t, 2*time.Minute)
	waitFor(t, 60*time.Second, "Bucket "+b.Name+" Ready for its generation", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		return conditions.IsTrue(b, conditions.Ready) && b.Status.ObservedGeneration == b.Generation &&
			!conditions.IsTrue(b, conditions.Reconciling), nil
	})
}

// settle waits until count has not changed for a second.
func settle(t *testing.T, count func() int) {
	t.Helper()
	last, since := count(), time.Now()
	waitFor(t, 20*time.Second, "activity to settle", func() (bool, error) {
		if n := count(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= time.Second, nil
	})
}

func eventsFor(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(e2etest.Context(t, 30*time.Second), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if name == "" || e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func waitEvent(t *testing.T, ns, name string, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	var seen []string
	waitFor(t, 30*time.Second, "event "+reason+" on "+name, func() (bool, error) {
		seen = seen[:0]
		for _, e := range eventsFor(t, ns, name) {
			if e.Reason == reason {
				found = e
				return true, nil
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
		}
		return false, fmt.Errorf("events on %s: %q", name, seen)
	})
	return found
}

func TestBucketReadyWithConnectionSecretAndNoSecretsInStatusOrEvents(t *testing.T) {
	f := newFixture(t)
	startOperator(t, f, nil, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	// 503s on the way produce Warning events with the cloud's error text:
	// those must not carry credentials either.
	f.cloud.FailNext(2, 0)
	b := newBucket(f.ns, "media")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)

	ext, ok := f.cloud.Get(b.Status.ExternalName)
	if !ok || ext.ClientToken != controller.RequestToken(b) || !ext.Versioning || ext.Region != "eu-west-1" {
		t.Fatalf("cloud bucket %q: %+v (found %v)", b.Status.ExternalName, ext, ok)
	}
	if b.Status.Endpoint != ext.Endpoint || b.Status.ConnectionSecretName != "media-connection" ||
		b.Annotations[storagev1.AnnotationCreateSucceeded] == "" || b.Annotations[storagev1.AnnotationCreatePending] != "" ||
		b.Annotations[storagev1.AnnotationExternalName] != ext.Name {
		t.Fatalf("status %+v annotations %v", b.Status, b.Annotations)
	}
	var conn corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "media-connection"}, &conn); err != nil {
		t.Fatal(err)
	}
	if string(conn.Data[controller.ConnectionSecretAccessKey]) != ext.SecretAccessKey || string(conn.Data[controller.ConnectionAccessKeyID]) != ext.AccessKeyID ||
		string(conn.Data[controller.ConnectionEndpoint]) != ext.Endpoint || !metav1.IsControlledBy(&conn, b) {
		t.Fatalf("connection Secret: %v, owners %v", conn.Data, conn.OwnerReferences)
	}
	if n := f.cloud.CallCount(""); n == 0 {
		t.Fatal("no cloud calls logged")
	}
	// The injected 503s must have produced a Warning event, or the scan below would prove little.
	waitFor(t, 30*time.Second, "a Warning event from the 503s", func() (bool, error) {
		for _, e := range eventsFor(t, f.ns, "media") {
			if e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})

	// The scan: the Bucket as stored (status, annotations, everything) and
	// every Event in the namespace.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(storagev1.GroupVersion.WithKind("Bucket"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), raw); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(raw.Object)
	if err != nil {
		t.Fatal(err)
	}
	events, err := json.Marshal(eventsFor(t, f.ns, ""))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"bucket secret key": ext.SecretAccessKey, "bucket access key": ext.AccessKeyID,
		"account secret key": f.creds.SecretAccessKey, "account access key": f.creds.AccessKeyID,
	}
	for what, v := range secrets {
		if strings.Contains(string(stored), v) {
			t.Errorf("the Bucket object contains the %s", what)
		}
		if strings.Contains(string(events), v) {
			t.Errorf("an Event contains the %s", what)
		}
	}
}

// TestCrashBetweenCreateAndStatusWriteMakesOneBucket kills the operator at the
// worst moment — the cloud has made the bucket, nothing in Kubernetes says so
// yet — and checks that a fresh operator finds that bucket instead of making
// a second one.
func TestCrashBetweenCreateAndStatusWriteMakesOneBucket(t *testing.T) {
	f := newFixture(t)
	ctx := e2etest.Context(t, 2*time.Minute)
	reached := make(chan *cloud.Bucket, 1)
	first := startOperator(t, f, nil, func(o *controller.Options) {
		o.AfterExternalCreate = func(ctx context.Context, _ *storagev1.Bucket, created *cloud.Bucket) error {
			select {
			case reached <- created:
			default:
			}
			<-ctx.Done() // the process "dies" here: nothing after this point runs
			return ctx.Err()
		}
	})
	b := newBucket(f.ns, "fragile")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	var created *cloud.Bucket
	select {
	case created = <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the operator never created the cloud bucket")
	}
	first.stop()

	if got := f.cloud.Buckets(); len(got) != 1 || got[0].Name != created.Name {
		t.Fatalf("cloud buckets after the crash: %+v", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if b.Annotations[storagev1.AnnotationExternalName] != created.Name || b.Annotations[storagev1.AnnotationCreatePending] == "" ||
		b.Annotations[storagev1.AnnotationCreateSucceeded] != "" {
		t.Fatalf("markers after the crash: %v", b.Annotations)
	}
	if conditions.Get(b, conditions.Ready) != nil || b.Status.ExternalName != "" {
		t.Fatalf("the killed operator wrote a status: %+v", b.Status)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "fragile-connection"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("connection Secret before recovery: %v", err)
	}

	startOperator(t, f, nil, nil)
	waitReady(t, b)
	if got := f.cloud.Buckets(); len(got) != 1 || got[0].Name != created.Name {
		t.Fatalf("cloud buckets after recovery: %+v", got)
	}
	if n := f.cloud.CallCount(cloud.OpCreate); n != 1 {
		t.Fatalf("%d CreateBucket calls, want 1: the fresh operator must find the bucket, not create it", n)
	}
	if b.Annotations[storagev1.AnnotationCreatePending] != "" || b.Annotations[storagev1.AnnotationCreateSucceeded] == "" {
		t.Fatalf("markers after recovery: %v", b.Annotations)
	}
	var conn corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "fragile-connection"}, &conn); err != nil {
		t.Fatal(err)
	}
	if string(conn.Data[controller.ConnectionSecretAccessKey]) != created.SecretAccessKey {
		t.Fatal("the connection Secret does not hold the credentials of the bucket the first create made")
	}
	waitEvent(t, f.ns, "fragile", controller.ReasonCreateRecovered)
}

// TestTimedOutCreateIsRetriedIntoTheSameBucket: the create's answer is lost
// (client timeout) but the cloud makes the bucket anyway; the retry carries
// the same request token and gets that bucket back.
func TestTimedOutCreateIsRetriedIntoTheSameBucket(t *testing.T) {
	f := newFixture(t)
	f.cloud.SlowNext(1, 3*time.Second, cloud.OpCreate)
	startOperator(t, f, nil, func(o *controller.Options) { o.CallTimeout = time.Second })
	b := newBucket(f.ns, "late")
	if err := env.Client.Create(e2etest.Context(t, time.Minute), b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	waitFor(t, 30*time.Second, "the slow create to finish on the server", func() (bool, error) {
		return f.cloud.CallCount(cloud.OpCreate) >= 2, nil
	})
	if got := f.cloud.Buckets(); len(got) != 1 {
		t.Fatalf("%d cloud buckets, want 1: %+v", len(got), got)
	}
}

func TestDeleteRemovesCloudBucketBeforeFinalizer(t *testing.T) {
	f := newFixture(t, cloud.WithDeleteDelay(1500*time.Millisecond))
	startOperator(t, f, nil, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	b := newBucket(f.ns, "doomed")
	kept := newBucket(f.ns, "kept")
	kept.Spec.DeletionPolicy = storagev1.DeletionOrphan
	for _, x := range []*storagev1.Bucket{b, kept} {
		if err := env.Client.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, b)
	waitReady(t, kept)
	if b.Finalizers[0] != controller.FinalizerName {
		t.Fatalf("finalizers %v", b.Finalizers)
	}
	name := b.Status.ExternalName
	for _, x := range []*storagev1.Bucket{b, kept} {
		if err := env.Client.Delete(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	sawWaiting := false
	waitFor(t, 60*time.Second, "Bucket doomed gone", func() (bool, error) {
		// Object first, cloud second: a bucket never comes back, so "object
		// gone, then bucket still there" proves the finalizer went too early.
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.Bucket{})
		ext, inCloud := f.cloud.Get(name)
		switch {
		case apierrors.IsNotFound(err):
			if inCloud {
				t.Fatalf("the finalizer let the Bucket go while its cloud bucket exists (%s)", ext.State)
			}
			return true, nil
		case err != nil:
			return false, err
		}
		if inCloud && ext.State == cloud.StateDeleting {
			sawWaiting = true
		}
		return false, nil
	})
	if !sawWaiting {
		t.Fatal("never saw the Bucket waiting for a deleting cloud bucket: the test proved nothing")
	}
	if n := f.cloud.CallCount(cloud.OpDelete); n != 1 {
		t.Fatalf("%d DeleteBucket calls, want 1 (then GETs until 404)", n)
	}
	waitFor(t, 30*time.Second, "Bucket kept gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(kept), &storagev1.Bucket{})
		return apierrors.IsNotFound(err), err
	})
	if ext, ok := f.cloud.Get(kept.Status.ExternalName); !ok || ext.State != cloud.StateAvailable {
		t.Fatalf("deletionPolicy Orphan: the cloud bucket should stay, got %+v %v", ext, ok)
	}
}

func TestTerminalCloudErrorsStallWithoutHotLoop(t *testing.T) {
	cases := map[string]struct {
		opts   []cloud.Option
		mutate func(*storagev1.Bucket)
		reason string
	}{
		"quota exceeded": {opts: []cloud.Option{cloud.WithMaxBuckets(0)}, reason: "QuotaExceeded"},
		// The schema allows it; the cloud's own rules do not.
		"invalid name": {mutate: func(b *storagev1.Bucket) { b.Spec.BucketName = "xn--punycode" }, reason: "InvalidBucketName"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.opts...)
			op := startOperator(t, f, nil, nil)
			ctx := e2etest.Context(t, time.Minute)
			b := newBucket(f.ns, "refused")
			if tc.mutate != nil {
				tc.mutate(b)
			}
			if err := env.Client.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "Bucket Stalled", func() (bool, error) {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
					return false, err
				}
				return conditions.IsTrue(b, conditions.Stalled), nil
			})
			stalled := conditions.Get(b, conditions.Stalled)
			if stalled.Reason != tc.reason || !conditions.IsFalse(b, conditions.Ready) || conditions.Get(b, conditions.Reconciling) != nil {
				t.Fatalf("conditions: %+v", b.Status.Conditions)
			}
			waitEvent(t, f.ns, "refused", tc.reason)
			// The marker write of the first attempt triggers one more
			// reconcile, and Events are sent asynchronously: let both finish.
			settle(t, func() int { return f.cloud.CallCount("") + op.requests.Writes() })
			if n := f.cloud.CallCount(cloud.OpCreate); n > 2 {
				t.Fatalf("%d CreateBucket calls before settling, want at most 2", n)
			}
			// A quiet window three resync intervals long: a Stalled Bucket
			// must not be retried until it changes.
			calls, writes := f.cloud.CallCount(""), op.requests.Writes()
			time.Sleep(3 * time.Second)
			if n := f.cloud.CallCount(""); n != calls {
				t.Fatalf("%d cloud calls during the quiet window on a Stalled Bucket: %+v", n-calls, f.cloud.Calls()[calls:])
			}
			if w := op.requests.Writes(); w != writes {
				t.Fatalf("%d API writes during the quiet window:\n%s", w-writes, op.requests)
			}
			if n := len(f.cloud.Buckets()); n != 0 {
				t.Fatalf("%d cloud buckets exist", n)
			}
		})
	}
}

func TestServiceUnavailableIsRetriedAndConverges(t *testing.T) {
	f := newFixture(t)
	f.cloud.FailNext(4, 0)
	startOperator(t, f, nil, nil)
	b := newBucket(f.ns, "flaky")
	if err := env.Client.Create(e2etest.Context(t, time.Minute), b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	failed := 0
	for _, c := range f.cloud.Calls() {
		if c.Status == 503 {
			failed++
		}
	}
	if failed != 4 {
		t.Fatalf("%d calls answered 503, want 4", failed)
	}
	if got := f.cloud.Buckets(); len(got) != 1 {
		t.Fatalf("%d cloud buckets, want 1", len(got))
	}
}

func TestTooManyRequestsWaitsRetryAfter(t *testing.T) {
	f := newFixture(t)
	startOperator(t, f, nil, nil)
	b := newBucket(f.ns, "busy")
	if err := env.Client.Create(e2etest.Context(t, time.Minute), b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	const retryAfter = 2 * time.Second
	// The next call — the resync's GET — is throttled. Meanwhile, poke the
	// Bucket so that events ask for reconciles before Retry-After passes.
	f.cloud.ThrottleNext(1, retryAfter)
	var throttledAt time.Time
	waitFor(t, 30*time.Second, "a 429", func() (bool, error) {
		for _, c := range f.cloud.Calls() {
			if c.Status == 429 {
				throttledAt = c.At
				return true, nil
			}
		}
		return false, nil
	})
	for i := range 3 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/poke":"`+string(rune('a'+i))+`"}}}`))
		if err := env.Client.Patch(e2etest.Context(t, 10*time.Second), b, patch); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var next time.Time
	waitFor(t, 30*time.Second, "a call after the 429", func() (bool, error) {
		for _, c := range f.cloud.Calls() {
			if c.At.After(throttledAt) {
				next = c.At
				return true, nil
			}
		}
		return false, nil
	})
	if waited := next.Sub(throttledAt); waited < retryAfter {
		t.Fatalf("the operator called again %s after a 429 with Retry-After %s", waited, retryAfter)
	}
	waitReady(t, b)
}

func TestDriftInTheCloudIsCorrectedWithAnEvent(t *testing.T) {
	f := newFixture(t)
	startOperator(t, f, nil, nil)
	b := newBucket(f.ns, "steady")
	if err := env.Client.Create(e2etest.Context(t, time.Minute), b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	off, large := false, cloud.QuotaLarge
	if _, err := f.client(t).Update(e2etest.Context(t, 10*time.Second), b.Status.ExternalName, cloud.UpdateRequest{Versioning: &off, QuotaClass: &large}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "cloud bucket set back to the spec", func() (bool, error) {
		ext, ok := f.cloud.Get(b.Status.ExternalName)
		return ok && ext.Versioning && ext.QuotaClass == cloud.QuotaStandard, nil
	})
	e := waitEvent(t, f.ns, "steady", controller.ReasonDriftCorrected)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "versioning false→true") || !strings.Contains(e.Note, "quotaClass large→standard") {
		t.Fatalf("event: %s %q", e.Type, e.Note)
	}
	waitReady(t, b)
}

func TestSpecImmutabilityIsEnforcedBySchema(t *testing.T) {
	f := newFixture(t)
	ctx := e2etest.Context(t, time.Minute)
	b := newBucket(f.ns, "fixed")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*storagev1.Bucket){
		"region":     func(b *storagev1.Bucket) { b.Spec.Region = "us-east-1" },
		"bucketName": func(b *storagev1.Bucket) { b.Spec.BucketName = "added-later" },
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			c := b.DeepCopy()
			mutate(c)
			if err := env.Client.Update(ctx, c); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") && !strings.Contains(err.Error(), "cannot be added") {
				t.Fatalf("want Invalid, got %v", err)
			}
		})
	}
}

func TestGeneratedRBACIsSufficient(t *testing.T) {
	f := newFixture(t)
	ctx := e2etest.Context(t, 2*time.Minute)
	objs, err := config.RBAC()
	if err != nil {
		t.Fatal(err)
	}
	limited, lc := e2etest.UserBoundTo(t, env, objs, "manager-role")
	// Least privilege: nothing beyond Buckets, Secrets and Events.
	if err := lc.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(f.ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator's role can list ConfigMaps: %v", err)
	}
	probe := newBucket(f.ns, "probe")
	if err := lc.Create(ctx, probe); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator's role can create Buckets: %v", err)
	}

	startOperator(t, f, limited, nil)
	b := newBucket(f.ns, "least")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	if err := env.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "Bucket deleted by the least-privileged operator", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.Bucket{})
		return apierrors.IsNotFound(err), err
	})
	if n := len(f.cloud.Buckets()); n != 0 {
		t.Fatalf("%d cloud buckets left", n)
	}
}

// TestDemoRunsBounded runs `go run ./examples/bucket --exit-when-ready` (what
// CI runs) so the demo cannot rot: its own control plane and fake cloud, the
// samples Ready, a drift corrected, a deletion finished.
func TestDemoRunsBounded(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	err := run(ctx, options{Flags: examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 2 * time.Minute, MetricsAddr: "0", ProbeAddr: "0"}, cloudListen: "127.0.0.1:0"})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
