package kustomizetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bucketconfig "github.com/opkit/opkit/examples/bucket/config"
	databaseconfig "github.com/opkit/opkit/examples/database/config"
	"github.com/opkit/opkit/examples/internal/manifest"
	tenantconfig "github.com/opkit/opkit/examples/tenant/config"
	webappconfig "github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/hardening"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths(filepath.Join("testdata", "crds"))))
}

// example is one example operator with a kustomize tree in examples/<name>/config.
type example struct {
	name     string
	webhooks bool
	crds     func() ([]*apiextensionsv1.CustomResourceDefinition, error)
}

var examples = []example{
	{name: "webapp", webhooks: true, crds: webappconfig.CRDs},
	{name: "bucket", crds: bucketconfig.CRDs},
	{name: "database", crds: databaseconfig.CRDs},
	{name: "tenant", crds: tenantconfig.CRDs},
}

func (e example) configDir() string        { return filepath.Join("..", "..", e.name, "config") }
func (e example) namespace() string        { return e.name + "-system" }
func (e example) prefixed(n string) string { return e.name + "-" + n }

func TestDefaultKustomizationRendersAWorkingInstall(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ctx := testContext(t)
			file, objs := render(ctx, t, filepath.Join(ex.configDir(), "default"))
			s := set{t: t, objs: objs}
			checkInstall(t, ex, s)
			if ex.name == "tenant" {
				// The prefix renames the ClusterRole the operator binds; a
				// replacement passes the new name to the operator.
				s.get("ClusterRole", "", ex.prefixed("tenant-admin"))
				var dep appsv1.Deployment
				s.decode(s.get("Deployment", ex.namespace(), ex.prefixed("controller-manager")), &dep)
				if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--default-admin-role="+ex.prefixed("tenant-admin")) {
					t.Errorf("the tenant operator is not told the prefixed tenant-admin role: args %v", args)
				}
			}
			if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" }) {
				t.Errorf("config/default includes a ServiceMonitor; the prometheus component is optional and off by default, as in kubebuilder")
			}
			ensureNamespace(ctx, t, ex.namespace())
			dryRun(ctx, t, file, objs)
			// The dry-run created nothing.
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ex.namespace(), Name: ex.prefixed("controller-manager")}, &appsv1.Deployment{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("the operator Deployment exists after a dry-run: %v", err)
			}
		})
	}
}

func TestPrometheusComponentAddsAServiceMonitorForTheMetricsService(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ctx := testContext(t)
			// What a user does: copy the tree and uncomment the prometheus line.
			tree := t.TempDir()
			if err := os.CopyFS(tree, os.DirFS(ex.configDir())); err != nil {
				t.Fatal(err)
			}
			kfile := filepath.Join(tree, "default", "kustomization.yaml")
			k, err := os.ReadFile(kfile)
			if err != nil {
				t.Fatal(err)
			}
			const off, on = "\n#- ../prometheus\n", "\n- ../prometheus\n"
			if bytes.Count(k, []byte(off)) != 1 {
				t.Fatalf("config/default/kustomization.yaml has no single commented-out %q line to enable", strings.TrimSpace(off))
			}
			if err := os.WriteFile(kfile, bytes.Replace(k, []byte(off), []byte(on), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			file, objs := render(ctx, t, filepath.Join(tree, "default"))
			s := set{t: t, objs: objs}
			checkInstall(t, ex, s)

			mon := s.get("ServiceMonitor", ex.namespace(), ex.prefixed("controller-manager-metrics-monitor"))
			var svc corev1.Service
			s.decode(s.get("Service", ex.namespace(), ex.prefixed("controller-manager-metrics-service")), &svc)
			match, _, _ := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
			if len(match) == 0 || !labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)) {
				t.Errorf("ServiceMonitor selector %v does not select the metrics Service (labels %v)", match, svc.Labels)
			}
			endpoints, _, _ := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
			if len(endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints = %v, want one", endpoints)
			}
			port, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "port")
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == port }) {
				t.Errorf("ServiceMonitor scrapes port %q, which the metrics Service does not name (%+v)", port, svc.Spec.Ports)
			}
			ensureNamespace(ctx, t, ex.namespace())
			dryRun(ctx, t, file, objs)
		})
	}
}

// checkInstall checks that the rendered objects of config/default fit together.
func checkInstall(t *testing.T, ex example, s set) {
	t.Helper()
	ns := ex.namespace()

	// The CRDs are exactly the generated ones the config package embeds.
	want, err := ex.crds()
	if err != nil {
		t.Fatal(err)
	}
	var wantNames, gotNames []string
	for _, c := range want {
		wantNames = append(wantNames, c.Name)
	}
	for _, o := range s.ofKind("CustomResourceDefinition") {
		gotNames = append(gotNames, o.GetName())
	}
	slices.Sort(wantNames)
	slices.Sort(gotNames)
	if len(wantNames) == 0 || !slices.Equal(gotNames, wantNames) {
		t.Errorf("rendered CRDs %v, want the generated %v", gotNames, wantNames)
	}

	// Everything else is named <example>-… and namespaced objects live in <example>-system.
	s.get("Namespace", "", ns)
	clusterScoped := []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
	for _, o := range s.objs {
		if !slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != ns {
			t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
		if !slices.Contains([]string{"Namespace", "CustomResourceDefinition"}, o.GetKind()) && !strings.HasPrefix(o.GetName(), ex.name+"-") {
			t.Errorf("%s %s lacks the name prefix %q", o.GetKind(), o.GetName(), ex.name+"-")
		}
	}

	// The Deployment: hardened, running as the ServiceAccount the bindings name.
	var dep appsv1.Deployment
	s.decode(s.get("Deployment", ns, ex.prefixed("controller-manager")), &dep)
	for _, p := range hardening.Deployment(&dep) {
		t.Errorf("rendered Deployment %s: %s", dep.Name, p)
	}
	sa := s.get("ServiceAccount", ns, ex.prefixed("controller-manager"))
	if dep.Spec.Template.Spec.ServiceAccountName != sa.GetName() {
		t.Errorf("Deployment runs as %q, want the ServiceAccount %q", dep.Spec.Template.Spec.ServiceAccountName, sa.GetName())
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Deployment selector %v does not select its pods (labels %v): %v", dep.Spec.Selector, dep.Spec.Template.Labels, err)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: ns}

	// RBAC: the generated ClusterRole bound to the ServiceAccount, and the leader-election Role.
	var crb rbacv1.ClusterRoleBinding
	s.decode(s.get("ClusterRoleBinding", "", ex.prefixed("manager-rolebinding")), &crb)
	s.get("ClusterRole", "", crb.RoleRef.Name)
	if crb.RoleRef.Name != ex.prefixed("manager-role") || !slices.Contains(crb.Subjects, subject) {
		t.Errorf("ClusterRoleBinding %s binds %s to %+v, want %s to %+v", crb.Name, crb.RoleRef.Name, crb.Subjects, ex.prefixed("manager-role"), subject)
	}
	var rb rbacv1.RoleBinding
	s.decode(s.get("RoleBinding", ns, ex.prefixed("leader-election-rolebinding")), &rb)
	s.get("Role", ns, rb.RoleRef.Name)
	if !slices.Contains(rb.Subjects, subject) {
		t.Errorf("RoleBinding %s binds %+v, want %+v", rb.Name, rb.Subjects, subject)
	}

	// The metrics Service selects the operator's pods on their metrics port.
	checkService(t, s, ex.prefixed("controller-manager-metrics-service"), ns, &dep)
	checkSecureMetrics(t, ex, s, &dep, subject)

	mutating, validating := s.ofKind("MutatingWebhookConfiguration"), s.ofKind("ValidatingWebhookConfiguration")
	if !ex.webhooks {
		if len(mutating)+len(validating) != 0 {
			t.Errorf("%s has no webhooks, yet the rendered set has webhook configurations", ex.name)
		}
		return
	}
	checkWebhooks(t, ex, s, &dep, mutating, validating)
}

// checkSecureMetrics checks kubebuilder's secure-metrics wiring: the
// operator serves metrics on :8443 with the secure default (no
// --metrics-secure=false), the metrics Service exposes 8443, the operator
// may create TokenReviews and SubjectAccessReviews (metrics-auth-role bound
// to its ServiceAccount), and the metrics-reader ClusterRole scrapers need
// is installed.
func checkSecureMetrics(t *testing.T, ex example, s set, dep *appsv1.Deployment, subject rbacv1.Subject) {
	t.Helper()
	args := dep.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--metrics-bind-address=:8443") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-secure") }) {
		t.Errorf("the operator's args %v: want --metrics-bind-address=:8443 and the secure default", args)
	}
	var svc corev1.Service
	s.decode(s.get("Service", ex.namespace(), ex.prefixed("controller-manager-metrics-service")), &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].Name != "https" {
		t.Errorf("metrics Service ports %+v, want one named https on 8443", svc.Spec.Ports)
	}
	var crb rbacv1.ClusterRoleBinding
	s.decode(s.get("ClusterRoleBinding", "", ex.prefixed("metrics-auth-rolebinding")), &crb)
	if crb.RoleRef.Name != ex.prefixed("metrics-auth-role") || !slices.Contains(crb.Subjects, subject) {
		t.Errorf("ClusterRoleBinding %s binds %s to %+v, want %s to %+v", crb.Name, crb.RoleRef.Name, crb.Subjects, ex.prefixed("metrics-auth-role"), subject)
	}
	var auth rbacv1.ClusterRole
	s.decode(s.get("ClusterRole", "", ex.prefixed("metrics-auth-role")), &auth)
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	} {
		if !slices.ContainsFunc(auth.Rules, func(r rbacv1.PolicyRule) bool { return equalRule(r, want) }) {
			t.Errorf("ClusterRole %s lacks %+v: %+v", auth.Name, want, auth.Rules)
		}
	}
	var reader rbacv1.ClusterRole
	s.decode(s.get("ClusterRole", "", ex.prefixed("metrics-reader")), &reader)
	if want := (rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}); len(reader.Rules) != 1 || !equalRule(reader.Rules[0], want) {
		t.Errorf("ClusterRole %s rules %+v, want only %+v", reader.Name, reader.Rules, want)
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs) && slices.Equal(a.ResourceNames, b.ResourceNames)
}

// checkWebhooks checks the webhook Service, the webhook configurations that
// call it and cert-manager's wiring: a Certificate for the Service's DNS
// names, its Secret mounted where the webhook server reads it, and the
// inject-ca-from annotation naming that Certificate.
func checkWebhooks(t *testing.T, ex example, s set, dep *appsv1.Deployment, mutating, validating []*unstructured.Unstructured) {
	t.Helper()
	ns := ex.namespace()
	svcName := ex.prefixed("webhook-service")
	checkService(t, s, svcName, ns, dep)

	var cert struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			DNSNames   []string `json:"dnsNames"`
			SecretName string   `json:"secretName"`
			IssuerRef  struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"issuerRef"`
		} `json:"spec"`
	}
	s.decode(s.get("Certificate", ns, ex.prefixed("serving-cert")), &cert)
	wantDNS := []string{svcName + "." + ns + ".svc", svcName + "." + ns + ".svc.cluster.local"}
	if !slices.Equal(cert.Spec.DNSNames, wantDNS) {
		t.Errorf("Certificate dnsNames = %v, want %v", cert.Spec.DNSNames, wantDNS)
	}
	s.get(cert.Spec.IssuerRef.Kind, ns, cert.Spec.IssuerRef.Name)
	wantCA := ns + "/" + cert.Metadata.Name

	if len(mutating) != 1 || len(validating) != 1 {
		t.Fatalf("rendered %d mutating and %d validating webhook configurations, want one each", len(mutating), len(validating))
	}
	for _, cfg := range append(mutating, validating...) {
		if got := cfg.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != wantCA {
			t.Errorf("%s %s: cert-manager.io/inject-ca-from = %q, want %q", cfg.GetKind(), cfg.GetName(), got, wantCA)
		}
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		if len(hooks) == 0 {
			t.Errorf("%s %s has no webhooks", cfg.GetKind(), cfg.GetName())
		}
		for _, h := range hooks {
			name, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
			namespace, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
			if name != svcName || namespace != ns {
				t.Errorf("%s %s calls Service %s/%s, want the created %s/%s", cfg.GetKind(), cfg.GetName(), namespace, name, ns, svcName)
			}
		}
	}

	// A CRD serving more than one version converts through the webhook
	// Service, with the same CA injection.
	for _, crd := range s.ofKind("CustomResourceDefinition") {
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if len(versions) < 2 {
			continue
		}
		strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
		name, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
		namespace, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
		path, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "path")
		if strategy != "Webhook" || name != svcName || namespace != ns || path != "/convert" {
			t.Errorf("CRD %s serves %d versions but converts with strategy %q via %s/%s%s, want Webhook via %s/%s/convert",
				crd.GetName(), len(versions), strategy, namespace, name, path, ns, svcName)
		}
		if got := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != wantCA {
			t.Errorf("CRD %s: cert-manager.io/inject-ca-from = %q, want %q", crd.GetName(), got, wantCA)
		}
	}

	pod := dep.Spec.Template.Spec
	if !slices.Contains(pod.Containers[0].Args, "--webhooks=on") {
		t.Errorf("the operator is not told to serve its webhooks: args %v", pod.Containers[0].Args)
	}
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName
	})
	if vol < 0 {
		t.Fatalf("no volume of the Deployment mounts the Certificate's Secret %q: %+v", cert.Spec.SecretName, pod.Volumes)
	}
	const certDir = "/tmp/k8s-webhook-server/serving-certs" // controller-runtime's default
	if !slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == pod.Volumes[vol].Name && m.MountPath == certDir && m.ReadOnly
	}) {
		t.Errorf("the certificate volume is not mounted read-only at %s: %+v", certDir, pod.Containers[0].VolumeMounts)
	}
}

// checkService checks that Service ns/name selects dep's pods and that each of
// its ports targets a port the operator container declares.
func checkService(t *testing.T, s set, name, ns string, dep *appsv1.Deployment) {
	t.Helper()
	var svc corev1.Service
	s.decode(s.get("Service", ns, name), &svc)
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service %s selector %v does not select the operator's pods (labels %v)", name, svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	ports := dep.Spec.Template.Spec.Containers[0].Ports
	for _, p := range svc.Spec.Ports {
		ok := slices.ContainsFunc(ports, func(c corev1.ContainerPort) bool {
			if p.TargetPort.Type == intstr.String {
				return c.Name == p.TargetPort.StrVal
			}
			return c.ContainerPort == p.TargetPort.IntVal
		})
		if !ok {
			t.Errorf("Service %s port %s targets %s, which the operator container does not declare (%+v)", name, p.Name, p.TargetPort.String(), ports)
		}
	}
}

// render runs `kubectl kustomize dir` with the harness's kubectl and returns
// the file holding its output and the objects in it.
func render(ctx context.Context, t *testing.T, dir string) (string, []*unstructured.Unstructured) {
	t.Helper()
	kubectl, err := env.KubectlPath(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v: %s", dir, err, stderr.String())
	}
	rendered := t.TempDir()
	file := filepath.Join(rendered, "rendered.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(os.DirFS(rendered), ".")
	if err != nil {
		t.Fatal(err)
	}
	return file, objs
}

// dryRun applies file server-side with --dry-run=server and checks that the
// API server accepted every object in it.
func dryRun(ctx context.Context, t *testing.T, file string, objs []*unstructured.Unstructured) {
	t.Helper()
	out, err := env.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--field-manager=opkit-kustomizetest", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "(server dry run)"); n != len(objs) {
		t.Fatalf("the API server accepted %d objects in the dry-run, want all %d:\n%s", n, len(objs), out)
	}
}

// ensureNamespace creates namespace name (the dry-run of namespaced objects
// needs it to exist) unless an earlier test created it.
func ensureNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// set is the rendered objects of one kustomization.
type set struct {
	t    *testing.T
	objs []*unstructured.Unstructured
}

// get returns the object of kind in namespace ns named name, failing the test if there is none.
func (s set) get(kind, ns, name string) *unstructured.Unstructured {
	s.t.Helper()
	for _, o := range s.objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	s.t.Fatalf("no %s %s/%s among the rendered objects", kind, ns, name)
	return nil
}

func (s set) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// decode converts o into into, strictly enough that a typo'd field fails.
func (s set) decode(o *unstructured.Unstructured, into any) {
	s.t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		s.t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// make install-<example> and uninstall-<example> run exactly these kubectl
// commands on config/crd: the CRDs are created, become Established, and are
// deleted again.
func TestCRDKustomizationInstallsAndUninstalls(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ctx := testContext(t)
			dir := filepath.Join(ex.configDir(), "crd")
			if _, err := env.Kubectl(ctx, "apply", "--server-side", "-k", dir); err != nil {
				t.Fatal(err)
			}
			crds, err := ex.crds()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range crds {
				if _, err := env.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+want.Name); err != nil {
					t.Fatal(err)
				}
			}
			// --wait=false: the API server's CRD cleanup (the
			// customresourcecleanup finalizer) can take minutes on a loaded
			// machine; what uninstall promises is that deletion is under
			// way, which the loop below checks.
			if _, err := env.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-k", dir); err != nil {
				t.Fatal(err)
			}
			for _, want := range crds {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				deadline := time.Now().Add(30 * time.Second)
				for {
					err := env.Client.Get(ctx, client.ObjectKey{Name: want.Name}, crd)
					if apierrors.IsNotFound(err) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if time.Now().After(deadline) {
						if crd.DeletionTimestamp.IsZero() {
							t.Fatalf("CRD %s not being deleted after delete -k", want.Name)
						}
						t.Logf("CRD %s still terminating after 30s (finalizers %v); deletion is under way", want.Name, crd.Finalizers)
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		})
	}
}
