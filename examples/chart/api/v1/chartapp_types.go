package v1

import (
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/helm"
)

// ChartAppSpec is what the bundled guestbook chart is released with.
type ChartAppSpec struct {
	// ChartVersion selects the bundled chart version: "1.0.0" or "1.1.0".
	// +kubebuilder:default="1.0.0"
	// +optional
	ChartVersion string `json:"chartVersion,omitempty"`
	// Message is the chart value "message" (shown by the guestbook).
	// +optional
	Message string `json:"message,omitempty"`
	// Replicas is the chart value "replicas".
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Values are further chart values, merged under the fields above; the
	// chart's values.schema.json validates the result.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// ChartAppStatus is the observed state of a ChartApp.
type ChartAppStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Release is the Helm release the operator made of this ChartApp.
	// +optional
	Release helm.ReleaseStatus `json:"release,omitzero"`
	// Conditions: Ready, Reconciling, Stalled (kstatus), Released,
	// ChildrenReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ChartApp is one release of the bundled guestbook chart.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Chart",type=string,JSONPath=`.status.release.chartVersion`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.release.revision`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.status.release.status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type ChartApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ChartAppSpec   `json:"spec,omitempty"`
	Status ChartAppStatus `json:"status,omitempty"`
}

// HelmRelease implements helm.Object.
func (a *ChartApp) HelmRelease() *helm.ReleaseStatus { return &a.Status.Release }

// ChartValues returns the values a ChartApp gives the chart: spec.values
// with message and replicas laid over them.
func (a *ChartApp) ChartValues() (map[string]any, error) {
	vals := map[string]any{}
	if a.Spec.Values != nil && len(a.Spec.Values.Raw) > 0 {
		if err := json.Unmarshal(a.Spec.Values.Raw, &vals); err != nil {
			return nil, err
		}
	}
	if a.Spec.Message != "" {
		vals["message"] = a.Spec.Message
	}
	if a.Spec.Replicas != nil {
		vals["replicas"] = int64(*a.Spec.Replicas)
	}
	return vals, nil
}

// ChartAppList is a list of ChartApps.
//
// +kubebuilder:object:root=true
type ChartAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChartApp `json:"items"`
}
