package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	"github.com/opkit/opkit/examples/database/backup"
	"github.com/opkit/opkit/examples/database/config"
	"github.com/opkit/opkit/examples/database/controller"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// DemoNamespace is where the embedded demo applies the sample Databases.
const DemoNamespace = "demo"

// The demo's tour: upgrade this sample to this version, then delete it (final
// backup); the other samples carry the waiver and are deleted without one.
const (
	tourDatabase = "orders"
	tourVersion  = "v2"
)

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(dbv1.AddToScheme) }

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
	var env *testenv.Env
	if embedded {
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		var stop func()
		env, stop, err = narrator.StartControlPlane("kube-apiserver, etcd, controller-manager, scheduler, kwok node",
			testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
		if err != nil {
			return err
		}
		defer stop()
		cfg = env.Config
		if o.degradedAfter == 0 {
			o.degradedAfter = 10 * time.Second
		}
	}
	o.DefaultAddrs(embedded)

	mgr, err := ctrl.NewManager(cfg, o.ManagerOptions(scheme, "database-operator.db.example.com"))
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	catalog := backup.New()
	if o.backupCatalog != "" {
		if catalog, err = backup.Open(o.backupCatalog); err != nil {
			return err
		}
	}
	if err := controller.Setup(mgr, controller.Options{Catalog: catalog, Observability: obs, DegradedAfter: o.degradedAfter}); err != nil {
		return err
	}

	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()
	d := &demo{c: env.Client, catalog: catalog}
	d.steps = examplecmd.Tour[[]dbv1.Database]{Narrator: narrator, Interval: 100 * time.Millisecond, Errc: bg.Err(),
		Read: func(ctx context.Context) ([]dbv1.Database, string, error) { return progress(ctx, d.c) }}
	if o.ExitWhenReady {
		d.steps.Deadline = time.Now().Add(o.Timeout)
	}
	if err := d.tour(ctx, env, o); err != nil {
		return err
	}
	if o.ExitWhenReady {
		say("tour complete; exiting as asked")
		bg.Stop()
		return nil
	}
	say("tour complete; the operator keeps running (Ctrl-C to stop). Try: kubectl delete database %s -n %s", tourDatabase, DemoNamespace)
	return d.steps.Until(ctx, "", func([]dbv1.Database) bool { return false })
}

// demo drives and narrates the tour.
type demo struct {
	c       client.Client
	catalog *backup.Catalog
	steps   examplecmd.Tour[[]dbv1.Database]
}

func (d *demo) tour(ctx context.Context, env *testenv.Env, o options) error {
	names, err := applySamples(ctx, d.c)
	if err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	if err := narrator.SayEndpoints(ctx, env, &o.Flags, DemoNamespace, kubectl); err != nil {
		return err
	}
	say("watch it:  %s get databases,statefulsets,pods,jobs -n %s", kubectl, DemoNamespace)
	say("or:        %s wait --for=condition=Ready databases --all -n %s", kubectl, DemoNamespace)

	if err := d.steps.Until(ctx, "every sample Database is Ready", func(dbs []dbv1.Database) bool {
		return len(dbs) == len(names) && allReady(dbs)
	}); err != nil {
		return err
	}

	say("1/3 upgrading %s to %s: a backup first, then one replica at a time (highest ordinal first)", tourDatabase, tourVersion)
	db := &dbv1.Database{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: tourDatabase}, db); err != nil {
		return err
	}
	patch := client.MergeFrom(db.DeepCopy())
	db.Spec.Version = tourVersion
	if err := d.c.Patch(ctx, db, patch); err != nil {
		return err
	}
	if err := d.steps.Until(ctx, tourDatabase+" runs "+tourVersion, func(dbs []dbv1.Database) bool {
		return allReady(dbs) && find(dbs, tourDatabase) != nil && find(dbs, tourDatabase).Status.CurrentVersion == tourVersion
	}); err != nil {
		return err
	}
	d.backups(tourDatabase)

	var waived []string
	for _, n := range names {
		if n != tourDatabase {
			waived = append(waived, n)
		}
	}
	say("2/3 deleting %s (annotated %s=true): no final backup is taken", strings.Join(waived, ", "), dbv1.SkipFinalBackupAnnotation)
	if err := d.deleteAll(ctx, waived); err != nil {
		return err
	}
	for _, n := range waived {
		d.backups(n)
	}
	if !o.ExitWhenReady {
		return nil
	}
	say("3/3 deleting %s: phase Deleting takes the final backup before the finalizer lets it go", tourDatabase)
	if err := d.deleteAll(ctx, []string{tourDatabase}); err != nil {
		return err
	}
	d.backups(tourDatabase)
	if _, ok := d.catalog.Find(DemoNamespace+"/"+tourDatabase, string(db.UID), backup.ReasonFinal); !ok {
		return fmt.Errorf("%s was deleted without its final backup in the catalog", tourDatabase)
	}
	return nil
}

func (d *demo) deleteAll(ctx context.Context, names []string) error {
	for _, n := range names {
		db := &dbv1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: n}}
		if err := d.c.Delete(ctx, db); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return d.steps.Until(ctx, strings.Join(names, ", ")+" gone", func(dbs []dbv1.Database) bool {
		for _, n := range names {
			if find(dbs, n) != nil {
				return false
			}
		}
		return true
	})
}

func (d *demo) backups(name string) {
	bs := d.catalog.List(DemoNamespace + "/" + name)
	if len(bs) == 0 {
		say("backup catalog for %s: (none)", name)
		return
	}
	for _, b := range bs {
		say("backup catalog for %s: %-22s reason=%-10s version=%s completed=%s", name, b.ID, b.Reason, b.Version, b.CompletedAt.Format(time.TimeOnly))
	}
}

func applySamples(ctx context.Context, c client.Client) ([]string, error) {
	if err := examplecmd.EnsureNamespace(ctx, c, DemoNamespace); err != nil {
		return nil, err
	}
	samples, err := config.Samples()
	if err != nil {
		return nil, err
	}
	return narrator.ApplySamples(ctx, c, DemoNamespace, samples)
}

// progress renders one line per Database, with its pods' versions.
func progress(ctx context.Context, c client.Client) ([]dbv1.Database, string, error) {
	var list dbv1.DatabaseList
	if err := c.List(ctx, &list, client.InNamespace(DemoNamespace)); err != nil {
		return nil, "", err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(DemoNamespace), client.MatchingLabels{"app.kubernetes.io/component": "server"}); err != nil {
		return nil, "", err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	var b strings.Builder
	for i := range list.Items {
		db := &list.Items[i]
		var ps []string
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Labels["app.kubernetes.io/instance"] != db.Name {
				continue
			}
			state := "ready"
			if !controller.PodReady(p) {
				state = "not-ready"
			}
			ps = append(ps, fmt.Sprintf("%s:%s:%s", strings.TrimPrefix(p.Name, db.Name+"-"), podVersion(p), state))
		}
		lastBackup := "-"
		if db.Status.LastBackup != nil {
			lastBackup = db.Status.LastBackup.Name
		}
		fmt.Fprintf(&b, "  database %-8s phase=%-12s version=%s current=%-2s ready=%d/%d pods=[%s] lastBackup=%s\n",
			db.Name, db.Status.Phase, db.Spec.Version, db.Status.CurrentVersion, db.Status.ReadyReplicas, db.DesiredReplicas(),
			strings.Join(ps, " "), lastBackup)
	}
	return list.Items, b.String(), nil
}

func podVersion(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == "db" {
			if i := strings.LastIndex(c.Image, ":"); i >= 0 {
				return c.Image[i+1:]
			}
		}
	}
	return "?"
}

func find(dbs []dbv1.Database, name string) *dbv1.Database {
	for i := range dbs {
		if dbs[i].Name == name {
			return &dbs[i]
		}
	}
	return nil
}

// allReady: every Database Ready for its generation and running its spec.version.
func allReady(dbs []dbv1.Database) bool {
	for i := range dbs {
		db := &dbs[i]
		if !conditions.IsTrue(db, conditions.Ready) || db.Status.ObservedGeneration != db.Generation ||
			db.Status.CurrentVersion != db.Spec.Version {
			return false
		}
	}
	return true
}

func say(format string, args ...any) { narrator.Say(format, args...) }
