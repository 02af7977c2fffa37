package conditions

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
)

// Mirror copies the child's condition childType into parent as targetType,
// with [Set] (so parent's observedGeneration is parent's generation and
// lastTransitionTime moves only when the mirrored status changes). The child
// may be any object whose status.conditions entries have type, status, reason
// and message — []metav1.Condition or a foreign type such as an apps/v1
// Deployment's, read through runtime.DefaultUnstructuredConverter. Status,
// reason and message are copied as they are, except: a status other than
// True/False/Unknown becomes Unknown, and a reason the API would reject is
// made valid with outcome.SanitizeReason (childType when nothing is left).
// When the child has not reported childType (or has no status yet), the
// [WithDefault] condition is written.
func Mirror(parent, child client.Object, childType, targetType string, opts ...MirrorOption) error {
	cs, err := List(child)
	if err != nil {
		return fmt.Errorf("conditions: mirror %s from %s: %w", targetType, describe(child), err)
	}
	o := newMirrorOptions(opts)
	var c metav1.Condition
	if i := indexOf(cs, childType); i >= 0 {
		src := cs[i]
		c = metav1.Condition{Status: src.Status, Reason: outcome.SanitizeReason(src.Reason, outcome.SanitizeReason(childType, ReasonNotYetReported)), Message: src.Message}
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			c.Status = metav1.ConditionUnknown
		}
	} else if o.dflt != nil {
		c = *o.dflt
	} else {
		c = metav1.Condition{
			Status:  metav1.ConditionUnknown,
			Reason:  ReasonNotYetReported,
			Message: fmt.Sprintf("%s %s has not reported %s", kindOf(child), objectName(child), childType),
		}
	}
	c.Type = targetType
	ps, err := StatusOf(parent)
	if err != nil {
		return err
	}
	return ps.set(c, o.setOptions)
}

func indexOf(cs []metav1.Condition, t string) int {
	for i := range cs {
		if cs[i].Type == t {
			return i
		}
	}
	return -1
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
