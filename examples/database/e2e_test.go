package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	"github.com/opkit/opkit/examples/database/backup"
	"github.com/opkit/opkit/examples/database/config"
	"github.com/opkit/opkit/examples/database/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	os.Exit(testenv.RunMain(m, &env, testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

// degradedAfter is the operator's threshold in these tests: short, so the
// Degraded test is quick, and long enough that no other test sees it.
const degradedAfter = 2 * time.Second

type operator struct {
	catalog  *backup.Catalog
	requests *testenv.RequestCounter
}

// startOperator runs the database operator until the test ends, watching only
// namespace ns: other tests' leftovers stay out of its caches and counts. cfg
// is the admin's unless given (e.g. a user bound to the generated role).
func startOperator(t *testing.T, ns string, cfg ...*rest.Config) *operator {
	t.Helper()
	c := env.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	mgr := e2etest.NewManager(t, c, env.Scheme, ns)
	op := &operator{catalog: backup.New(), requests: mgr.Requests}
	if err := controller.Setup(mgr, controller.Options{Catalog: op.catalog, Observability: mgr.Observability, DegradedAfter: degradedAfter}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	return op
}

func newDB(ns, name, version string, replicas int32) *dbv1.Database {
	return &dbv1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       dbv1.DatabaseSpec{Version: version, Replicas: replicas},
	}
}

// waitPhase waits until db is in phase p for its current generation (and,
// for Ready, runs spec.version).
func waitPhase(t *testing.T, db *dbv1.Database, p string) {
	t.Helper()
	ctx := e2etest.Context(t, 2*time.Minute)
	e2etest.WaitFor(t, 90*time.Second, "Database "+db.Name+" in phase "+p, func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
			return false, err
		}
		ok := db.Status.Phase == p && db.Status.ObservedGeneration == db.Generation
		if p == "Ready" {
			ok = ok && conditions.IsTrue(db, conditions.Ready) && db.Status.CurrentVersion == db.Spec.Version
		}
		return ok, fmt.Errorf("phase %q, conditions %v", db.Status.Phase, db.Status.Conditions)
	})
}

// event is one observation of a watch, in the order the API server sent them.
type event struct {
	at   time.Time
	kind string // Database, Pod, StatefulSet
	typ  watch.EventType
	obj  client.Object
}

// timeline records watch events of Databases, Pods and StatefulSets in ns
// from the moment it starts until the test ends.
type timeline struct {
	mu     sync.Mutex
	events []event
}

// watchedKinds are the kinds a timeline records, each with an empty list of
// that kind.
func watchedKinds() map[string]client.ObjectList {
	return map[string]client.ObjectList{"Database": &dbv1.DatabaseList{}, "Pod": &corev1.PodList{}, "StatefulSet": &appsv1.StatefulSetList{}}
}

func watchNamespace(t *testing.T, ns string) *timeline {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	tl := &timeline{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for kind, list := range watchedKinds() {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					obj, isObj := ev.Object.(client.Object)
					if !isObj || ev.Type == watch.Error || ev.Type == watch.Bookmark {
						continue
					}
					tl.mu.Lock()
					tl.events = append(tl.events, event{at: time.Now(), kind: kind, typ: ev.Type, obj: obj})
					tl.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return tl
}

func (tl *timeline) snapshot() []event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]event(nil), tl.events...)
}

// caughtUp waits until the timeline holds every Database, Pod and
// StatefulSet in ns as a read from the API server finds it now (an event
// with the object's current resourceVersion) and a Deleted event for each
// Database named in gone. A watch delivers its events in order but after
// the write: a test that has seen a state by a GET must wait for it here
// before it reads the timeline, or it races the watch (the upgrade test
// once saw "Ready → BackingUp → Upgrading", its last Ready still in
// flight).
func (tl *timeline) caughtUp(t *testing.T, ns string, gone ...string) {
	t.Helper()
	ctx := e2etest.Context(t, time.Minute)
	want := map[string]bool{} // kind/name@resourceVersion
	for kind, list := range watchedKinds() {
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			want[kind+"/"+obj.GetName()+"@"+obj.GetResourceVersion()] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range gone {
		want["Database/"+name+"@deleted"] = true
	}
	e2etest.WaitFor(t, 30*time.Second, "the watches to deliver what a read finds", func() (bool, error) {
		missing := maps.Clone(want)
		for _, e := range tl.snapshot() {
			delete(missing, e.kind+"/"+e.obj.GetName()+"@"+e.obj.GetResourceVersion())
			if e.typ == watch.Deleted {
				delete(missing, e.kind+"/"+e.obj.GetName()+"@deleted")
			}
		}
		return len(missing) == 0, fmt.Errorf("not delivered yet: %v", slices.Sorted(maps.Keys(missing)))
	})
}

// phases returns the distinct consecutive phases the timeline saw for db.
func (tl *timeline) phases(name string) []string {
	var out []string
	for _, e := range tl.snapshot() {
		if db, ok := e.obj.(*dbv1.Database); ok && e.kind == "Database" && db.Name == name {
			if p := db.Status.Phase; p != "" && (len(out) == 0 || out[len(out)-1] != p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func TestCreateBecomesReadyThroughProvisioning(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns)
	tl := watchNamespace(t, ns)
	ctx := e2etest.Context(t, 2*time.Minute)
	db := newDB(ns, "orders", "v1", 3)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	tl.caughtUp(t, ns)

	if got, want := strings.Join(tl.phases("orders"), " → "), "Pending → Provisioning → Ready"; got != want {
		t.Fatalf("phases %q, want %q", got, want)
	}
	var sts appsv1.StatefulSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, &sts); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&sts, db) || sts.Status.ReadyReplicas != 3 || db.Status.ReadyReplicas != 3 {
		t.Fatalf("StatefulSet: controlled %v, ready %d; Database ready %d", metav1.IsControlledBy(&sts, db), sts.Status.ReadyReplicas, db.Status.ReadyReplicas)
	}
	if img := sts.Spec.Template.Spec.Containers[0].Image; img != controller.Image(controller.DefaultImage, "v1") {
		t.Fatalf("image %s", img)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(controller.Labels(db))); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; !controller.PodReady(p) || p.Spec.NodeName != testenv.FakeNodeName {
			t.Fatalf("pod %s: ready %v on node %q", p.Name, controller.PodReady(p), p.Spec.NodeName)
		}
	}
	var svc corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("Service is not headless: clusterIP %q", svc.Spec.ClusterIP)
	}
	if db.Status.CurrentVersion != "v1" || db.Status.PhaseTransitionTime == nil || !conditions.IsTrue(db, controller.ConditionReplicasReady) ||
		len(db.Finalizers) != 1 || db.Finalizers[0] != controller.FinalizerName {
		t.Fatalf("status %+v, finalizers %v", db.Status, db.Finalizers)
	}
	if op.catalog.Len() != 0 {
		t.Fatalf("a fresh Database took %d backups", op.catalog.Len())
	}

	// Steady state: the Ready phase costs no write and no live GET. Let the
	// last status writes settle, then watch a quiet window.
	time.Sleep(2 * time.Second)
	op.requests.Reset()
	time.Sleep(3 * time.Second)
	if w, g := op.requests.Writes(), op.requests.Verb("get"); w != 0 || g != 0 {
		t.Fatalf("steady state made %d writes and %d live GETs:\n%s", w, g, op.requests)
	}
}

func podVersionOf(p *corev1.Pod) string { return podVersion(p) }

func TestUpgradeBacksUpThenRollsOneReplicaAtATime(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns)
	ctx := e2etest.Context(t, 3*time.Minute)
	db := newDB(ns, "orders", "v1", 3)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	tl := watchNamespace(t, ns)
	// Let the watches deliver their initial state before the change.
	e2etest.WaitFor(t, 10*time.Second, "watches primed", func() (bool, error) { return len(tl.snapshot()) >= 5, nil })

	patch := client.MergeFrom(db.DeepCopy())
	db.Spec.Version = "v2"
	if err := env.Client.Patch(ctx, db, patch); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	tl.caughtUp(t, ns)

	if got, want := strings.Join(tl.phases("orders"), " → "), "Ready → BackingUp → Upgrading → Ready"; got != want {
		t.Fatalf("phases %q, want %q", got, want)
	}
	// The backup: recorded before any pod ran v2, from v1.
	b, ok := op.catalog.Find(ns+"/orders", string(db.UID), backup.ReasonPreUpgrade)
	if !ok || b.Version != "v1" || db.Status.LastBackup == nil || db.Status.LastBackup.Name != b.ID {
		t.Fatalf("pre-upgrade backup %+v (found %v), status.lastBackup %+v", b, ok, db.Status.LastBackup)
	}

	// Replay the timeline: pods by name, the order v2 pods appeared in, and
	// the number of v2 pods not yet Ready after every event.
	type podState struct {
		version string
		ready   bool
		uid     string
	}
	pods := map[string]podState{}
	var order []string
	var partitions []int32
	var images []string
	upgradingSeen := false
	var log []string
	for _, e := range tl.snapshot() {
		switch o := e.obj.(type) {
		case *dbv1.Database:
			if o.Status.Phase == "Upgrading" {
				upgradingSeen = true
			}
		case *appsv1.StatefulSet:
			p := *o.Spec.UpdateStrategy.RollingUpdate.Partition
			if len(partitions) == 0 || partitions[len(partitions)-1] != p {
				partitions = append(partitions, p)
			}
			if img := stsImage(o); len(images) == 0 || images[len(images)-1] != img {
				images = append(images, img)
			}
			log = append(log, fmt.Sprintf("%s   statefulset gen=%d observed=%d image=%s partition=%d update=%s current=%s",
				e.at.Format("15:04:05.000"), o.Generation, o.Status.ObservedGeneration, stsImage(o), p,
				o.Status.UpdateRevision, o.Status.CurrentRevision))
		case *corev1.Pod:
			if o.Labels["app.kubernetes.io/component"] != "server" {
				continue // the backup Job's pod
			}
			log = append(log, fmt.Sprintf("%s   pod %s %s uid=%s rev=%s version=%s ready=%v deleting=%v",
				e.at.Format("15:04:05.000"), o.Name, e.typ, o.UID, o.Labels[appsv1.ControllerRevisionHashLabelKey],
				podVersionOf(o), controller.PodReady(o), o.DeletionTimestamp != nil))
			if e.typ == watch.Deleted {
				if pods[o.Name].uid == string(o.UID) {
					delete(pods, o.Name)
				}
				continue
			}
			prev, had := pods[o.Name]
			st := podState{version: podVersionOf(o), ready: controller.PodReady(o) && o.DeletionTimestamp == nil, uid: string(o.UID)}
			pods[o.Name] = st
			if st.version == "v2" && (!had || prev.uid != st.uid) {
				if !upgradingSeen {
					t.Fatalf("pod %s runs v2 before the Database entered Upgrading (after its backup)", o.Name)
				}
				// The StatefulSet controller sometimes deletes a pod it has
				// just created (its delete goes by name, from a pod cache that
				// still holds the old pod) and creates it again: the order is
				// that of each ordinal's first v2 pod.
				if !slices.Contains(order, o.Name) {
					order = append(order, o.Name)
				}
				log = append(log, fmt.Sprintf("%s %s created on v2", e.at.Format("15:04:05.000"), o.Name))
			}
			if st.version == "v2" && st.ready && !prev.ready {
				log = append(log, fmt.Sprintf("%s %s Ready on v2", e.at.Format("15:04:05.000"), o.Name))
			}
			notReady := 0
			for _, s := range pods {
				if s.version == "v2" && !s.ready {
					notReady++
				}
			}
			if notReady > 1 {
				t.Fatalf("%d pods on v2 not Ready at once at %s:\n%s", notReady, e.at.Format(time.StampMilli), strings.Join(log, "\n"))
			}
		}
	}
	t.Logf("upgrade timeline:\n%s", strings.Join(log, "\n"))
	if got := strings.Join(order, ","); got != "orders-2,orders-1,orders-0" {
		t.Fatalf("v2 pods created in the order %s, want orders-2,orders-1,orders-0", got)
	}
	// The operator changed the template once, and never back.
	if got, want := strings.Join(images, " → "), controller.Image(controller.DefaultImage, "v1")+" → "+controller.Image(controller.DefaultImage, "v2"); got != want {
		t.Fatalf("StatefulSet template images %s, want %s", got, want)
	}
	if got := fmt.Sprint(partitions); got != "[0 2 1 0]" {
		t.Fatalf("partition steps %s, want [0 2 1 0]", got)
	}
	for name, s := range pods {
		if s.version != "v2" || !s.ready {
			t.Fatalf("pod %s at the end: %+v", name, s)
		}
	}
}

func TestLostReplicaDegradesAndRecovers(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns)
	ctx := e2etest.Context(t, 3*time.Minute)
	db := newDB(ns, "flaky", "v1", 2)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")

	// Lose a replica for good: cordon the only node, so the StatefulSet's
	// replacement pod stays Pending, then delete the pod.
	setUnschedulable := func(on bool) error {
		var node corev1.Node
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: testenv.FakeNodeName}, &node); err != nil {
			return err
		}
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = on
		return env.Client.Patch(context.Background(), &node, patch)
	}
	if err := setUnschedulable(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setUnschedulable(false); err != nil {
			t.Errorf("uncordon %s: %v", testenv.FakeNodeName, err)
		}
	})
	lostAt := time.Now()
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flaky-1"}}); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Degraded")
	if d := time.Since(lostAt); d < degradedAfter {
		t.Fatalf("Degraded after %s, before the %s threshold", d, degradedAfter)
	}
	if !conditions.IsTrue(db, conditions.Degraded) || conditions.IsTrue(db, conditions.Ready) || !conditions.IsFalse(db, controller.ConditionReplicasReady) ||
		db.Status.ReadyReplicas != 1 {
		t.Fatalf("Degraded status: %+v", db.Status)
	}

	if err := setUnschedulable(false); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	if conditions.IsTrue(db, conditions.Degraded) || db.Status.ReadyReplicas != 2 || !conditions.IsTrue(db, controller.ConditionReplicasReady) {
		t.Fatalf("recovered status: %+v", db.Status)
	}
}

func TestDeleteTakesFinalBackupUnlessWaived(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns)
	tl := watchNamespace(t, ns)
	ctx := e2etest.Context(t, 3*time.Minute)
	kept := newDB(ns, "kept", "v1", 1)
	waived := newDB(ns, "waived", "v1", 1)
	waived.Annotations = map[string]string{dbv1.SkipFinalBackupAnnotation: "true"}
	for _, db := range []*dbv1.Database{kept, waived} {
		if err := env.Client.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []*dbv1.Database{kept, waived} {
		waitPhase(t, db, "Ready")
	}
	for _, db := range []*dbv1.Database{kept, waived} {
		if err := env.Client.Delete(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []*dbv1.Database{kept, waived} {
		e2etest.WaitFor(t, 90*time.Second, "Database "+db.Name+" gone", func() (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), &dbv1.Database{})
			return apierrors.IsNotFound(err), err
		})
	}
	tl.caughtUp(t, ns, kept.Name, waived.Name)

	b, ok := op.catalog.Find(ns+"/kept", string(kept.UID), backup.ReasonFinal)
	if !ok || b.Version != "v1" || b.ID != "kept-backup-final" {
		t.Fatalf("final backup of kept: %+v (found %v); catalog: %+v", b, ok, op.catalog.List(ns+"/kept"))
	}
	if bs := op.catalog.List(ns + "/waived"); len(bs) != 0 {
		t.Fatalf("the waived Database was backed up: %+v", bs)
	}
	for name, want := range map[string]string{"kept": "Ready → Deleting", "waived": "Ready → Deleting"} {
		if got := strings.Join(tl.phases(name), " → "); !strings.HasSuffix(got, want) {
			t.Fatalf("%s phases %q, want them to end with %q", name, got, want)
		}
	}
	// No final backup Job was ever created for the waived Database.
	var jobs batchv1.JobList
	if err := env.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if strings.HasPrefix(j.Name, "waived-") {
			t.Fatalf("backup Job %s exists for the waived Database", j.Name)
		}
	}
}

// TestStorageBindsToAStaticVolume shows spec.storage under kwok: there is no
// storage provisioner, so a replica's claim stays Pending and the scheduler
// keeps its pod Pending ("unbound immediate PersistentVolumeClaims") until a
// PersistentVolume it can bind exists — here one created by hand, as an
// administrator pre-provisions volumes (static provisioning).
func TestStorageBindsToAStaticVolume(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns)
	ctx := e2etest.Context(t, 2*time.Minute)
	db := newDB(ns, "stored", "v1", 1)
	db.Spec.Storage = &dbv1.StorageSpec{Size: resource.MustParse("1Gi")}
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	e2etest.WaitFor(t, 60*time.Second, "pod stored-0 Pending and unschedulable", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stored-0"}, pod); err != nil {
			return false, err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return strings.Contains(c.Message, "PersistentVolumeClaim"), fmt.Errorf("%s", c.Message)
			}
		}
		return false, nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if db.Status.Phase != "Provisioning" {
		t.Fatalf("phase %q while the claim is unbound, want Provisioning", db.Status.Phase)
	}

	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			// Reserved for this claim, so no other test's claim takes it.
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: "data-stored-0"},
		},
	}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	waitPhase(t, db, "Ready")
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-stored-0"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != pv.Name {
		t.Fatalf("claim %s: phase %s, volume %q", pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
}

func TestInvalidDatabasesAreRejectedBySchema(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, time.Minute)
	cases := map[string]struct {
		mutate func(*dbv1.Database)
		field  string
	}{
		"bad version":       {func(d *dbv1.Database) { d.Spec.Version = "latest" }, "spec.version"},
		"negative replicas": {func(d *dbv1.Database) { d.Spec.Replicas = -1 }, "spec.replicas"},
		"too many":          {func(d *dbv1.Database) { d.Spec.Replicas = 10 }, "spec.replicas"},
		"long name":         {func(d *dbv1.Database) { d.Name = strings.Repeat("a", 41) }, "name must be at most 40 characters"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db := newDB(ns, "invalid", "v1", 1)
			tc.mutate(db)
			err := env.Client.Create(ctx, db)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want Invalid naming %s, got %v", tc.field, err)
			}
		})
	}
	t.Run("storage is immutable", func(t *testing.T) {
		db := newDB(ns, "fixed", "v1", 1)
		db.Spec.Storage = &dbv1.StorageSpec{Size: resource.MustParse("1Gi")}
		if err := env.Client.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
		db.Spec.Storage.Size = resource.MustParse("2Gi")
		if err := env.Client.Update(ctx, db); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "storage is immutable") {
			t.Fatalf("want Invalid: storage is immutable, got %v", err)
		}
	})
}

// TestDemoRunsBounded runs the README's demo in its bounded mode (what CI
// runs) so the demo cannot rot: an embedded control plane of its own, the
// samples applied, the upgrade, and both kinds of deletion.
func TestDemoRunsBounded(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	err := run(ctx, options{Flags: examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 3 * time.Minute, MetricsAddr: "0", ProbeAddr: "0"}, degradedAfter: 10 * time.Second})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestGeneratedRBACIsSufficient runs the operator as a user bound to ONLY the
// ClusterRole generated from its +kubebuilder:rbac markers, through a whole
// life cycle including the final backup, and shows the role grants nothing
// the operator does not need.
func TestGeneratedRBACIsSufficient(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, 3*time.Minute)
	roles := e2etest.Must(config.RBAC())
	limited, lc := e2etest.UserBoundTo(t, env, roles, "manager-role")
	if err := lc.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator's role can list Secrets: %v", err)
	}
	if err := lc.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "any"}}); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator's role can delete Pods: %v", err)
	}

	op := startOperator(t, ns, limited)
	db := newDB(ns, "least", "v1", 1)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	if err := env.Client.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 90*time.Second, "Database deleted by the least-privileged operator", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), &dbv1.Database{})
		return apierrors.IsNotFound(err), err
	})
	if _, ok := op.catalog.Find(ns+"/least", string(db.UID), backup.ReasonFinal); !ok {
		t.Fatal("no final backup taken by the least-privileged operator")
	}
}

// stsImage is the db container's image in sts's pod template.
func stsImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "db" {
			return c.Image
		}
	}
	return "?"
}
