package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// MutatePath is the URL path [Install] serves T's defaulting webhook on. It
// is the path controller-runtime's builder and kubebuilder's markers use:
// "/mutate-<group with dots as dashes>-<version>-<lower-case kind>".
func MutatePath(gvk schema.GroupVersionKind) string { return "/mutate-" + pathSuffix(gvk) }

// ValidatePath is the URL path [Install] serves T's validating webhook on,
// "/validate-<group with dots as dashes>-<version>-<lower-case kind>".
func ValidatePath(gvk schema.GroupVersionKind) string { return "/validate-" + pathSuffix(gvk) }

func pathSuffix(gvk schema.GroupVersionKind) string {
	return strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// Install registers obj's defaulting webhook at [MutatePath] (when d is not
// nil) and validating webhook at [ValidatePath] (when v is not nil) on mgr's
// webhook server, each built by [NewDefaultingWebhook] / [NewValidatingWebhook].
// obj's type must be registered in mgr's scheme. Conversion is not installed
// here: builder.WebhookManagedBy(mgr, hub).Complete() registers "/convert" for
// types that implement conversion.Hub / conversion.Convertible.
func Install[T client.Object](mgr manager.Manager, obj T, d admission.Defaulter[T], v admission.Validator[T], opts ...admission.DefaulterOption) error {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("webhook: install: %w", err)
	}
	srv := mgr.GetWebhookServer()
	if !isNil(d) {
		wh, err := NewDefaultingWebhook(mgr.GetScheme(), obj, d, opts...)
		if err != nil {
			return err
		}
		srv.Register(MutatePath(gvk), wh)
	}
	if !isNil(v) {
		wh, err := NewValidatingWebhook(mgr.GetScheme(), obj, v)
		if err != nil {
			return err
		}
		srv.Register(ValidatePath(gvk), wh)
	}
	return nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// NewValidatingWebhook wraps controller-runtime's admission.WithValidator in
// a guard that turns every malformed request into a denial naming the request
// field at fault, before v sees it:
//
//   - request.kind other than obj's group/version/kind: Invalid at request.kind;
//   - an operation other than CREATE, UPDATE, DELETE or CONNECT: Unsupported at request.operation;
//   - no request.object on CREATE/UPDATE, or no request.oldObject on UPDATE/DELETE: Required;
//   - an object that does not decode into T (bad JSON, wrong kind, wrong field types): Invalid at request.object.
//
// Denials are 4xx statuses in an HTTP 200 AdmissionReview: the guard also
// downgrades any 5xx answer (a recovered panic, an encoding failure) to
// 403 Forbidden with its message, so the API server never reports an
// internal error for a request it could retry into the same failure.
func NewValidatingWebhook[T client.Object](scheme *runtime.Scheme, obj T, v admission.Validator[T]) (*admission.Webhook, error) {
	g, err := newGuard(scheme, obj, false)
	if err != nil {
		return nil, err
	}
	g.inner = admission.WithValidator(scheme, v).Handler
	return &admission.Webhook{Handler: g}, nil
}

// NewDefaultingWebhook is [NewValidatingWebhook] for a defaulter: the same
// guard, around controller-runtime's admission.WithDefaulter (which answers
// with a JSON patch, or with no patch when d changed nothing). DELETE
// requests are allowed untouched.
func NewDefaultingWebhook[T client.Object](scheme *runtime.Scheme, obj T, d admission.Defaulter[T], opts ...admission.DefaulterOption) (*admission.Webhook, error) {
	g, err := newGuard(scheme, obj, true)
	if err != nil {
		return nil, err
	}
	g.inner = admission.WithDefaulter(scheme, d, opts...).Handler
	return &admission.Webhook{Handler: g}, nil
}

type guard struct {
	gvk      schema.GroupVersionKind
	mutating bool
	decoder  admission.Decoder
	newObj   func() runtime.Object
	inner    admission.Handler
}

func newGuard[T client.Object](scheme *runtime.Scheme, obj T, mutating bool) (*guard, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &guard{
		gvk:      gvk,
		mutating: mutating,
		decoder:  admission.NewDecoder(scheme),
		newObj: func() runtime.Object {
			o, err := scheme.New(gvk)
			if err != nil {
				return obj.DeepCopyObject()
			}
			return o
		},
	}, nil
}

// Handle implements admission.Handler.
func (g *guard) Handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = admission.Denied(fmt.Sprintf("%s webhook for %s panicked (request denied; this is a bug in the webhook): %v",
				g.what(), requestRef(req), r))
		}
	}()
	if g.mutating && req.Operation == admissionv1.Delete {
		return admission.Allowed("")
	}
	if errs := g.check(req); len(errs) > 0 {
		st := apierrors.NewInvalid(g.gvk.GroupKind(), req.Name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
	}
	resp = g.inner.Handle(ctx, req)
	if !resp.Allowed && resp.Result != nil && resp.Result.Code >= http.StatusInternalServerError {
		resp.Result.Code = http.StatusForbidden
		resp.Result.Reason = metav1.StatusReasonForbidden
		resp.Result.Message = fmt.Sprintf("%s webhook failed for %s (request denied): %s", g.what(), requestRef(req), resp.Result.Message)
	}
	return resp
}

func (g *guard) what() string {
	if g.mutating {
		return "defaulting"
	}
	return "validating"
}

func requestRef(req admission.Request) string {
	if req.Namespace == "" {
		return req.Name
	}
	return req.Namespace + "/" + req.Name
}

func (g *guard) check(req admission.Request) field.ErrorList {
	root := field.NewPath("request")
	var errs field.ErrorList
	want := metav1.GroupVersionKind{Group: g.gvk.Group, Version: g.gvk.Version, Kind: g.gvk.Kind}
	if req.Kind != want {
		errs = append(errs, field.Invalid(root.Child("kind"), gvkString(req.Kind),
			"this webhook admits only "+gvkString(want)))
	}
	needObj, needOld := false, false
	switch req.Operation {
	case admissionv1.Create:
		needObj = true
	case admissionv1.Update:
		needObj, needOld = true, !g.mutating
	case admissionv1.Delete:
		needOld = true
	case admissionv1.Connect:
	default:
		errs = append(errs, field.NotSupported(root.Child("operation"), req.Operation,
			[]admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}))
	}
	if needObj {
		errs = append(errs, g.checkObject(root.Child("object"), req.Object)...)
	}
	if needOld {
		errs = append(errs, g.checkObject(root.Child("oldObject"), req.OldObject)...)
	}
	return errs
}

func (g *guard) checkObject(path *field.Path, raw runtime.RawExtension) field.ErrorList {
	if len(raw.Raw) == 0 {
		return field.ErrorList{field.Required(path, "the request carries no object")}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw.Raw, &tm); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "not a JSON object: "+err.Error())}
	}
	if tm.APIVersion != "" || tm.Kind != "" {
		if got := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind); got != g.gvk {
			return field.ErrorList{field.Invalid(path.Child("kind"), tm.APIVersion+", Kind="+tm.Kind,
				"this webhook admits only "+g.gvk.GroupVersion().String()+", Kind="+g.gvk.Kind)}
		}
	}
	// Decoding twice (here and in the wrapped handler) costs microseconds and
	// lets the denial name the field instead of surfacing a decoder error.
	if err := g.decoder.DecodeRaw(raw, g.newObj()); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "does not decode as "+g.gvk.Kind+": "+err.Error())}
	}
	return nil
}

func gvkString(k metav1.GroupVersionKind) string {
	gv := k.Version
	if k.Group != "" {
		gv = k.Group + "/" + k.Version
	}
	return gv + ", Kind=" + k.Kind
}
