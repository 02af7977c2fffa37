package helm_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opkit/opkit/helm"
)

var appGV = schema.GroupVersion{Group: "helmtest.opkit.dev", Version: "v1"}

// App is the tests' chart-backed kind: spec.chart names a test chart,
// spec.values are its values.
type App struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AppSpec   `json:"spec,omitempty"`
	Status            AppStatus `json:"status,omitempty"`
}

type AppSpec struct {
	Chart  string         `json:"chart,omitempty"`
	Values map[string]any `json:"values,omitempty"`
}

type AppStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Release            helm.ReleaseStatus `json:"release,omitzero"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

func (a *App) HelmRelease() *helm.ReleaseStatus { return &a.Status.Release }

type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []App `json:"items"`
}

func (a *App) DeepCopyObject() runtime.Object {
	out := *a
	a.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Values = runtime.DeepCopyJSON(a.Spec.Values)
	out.Status.Conditions = append([]metav1.Condition(nil), a.Status.Conditions...)
	return &out
}

func (l *AppList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]App, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*App)
	}
	return &out
}

func addApps(s *runtime.Scheme) error {
	s.AddKnownTypes(appGV, &App{}, &AppList{})
	metav1.AddToGroupVersion(s, appGV)
	return nil
}
