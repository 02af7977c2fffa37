package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// CreateFunc validates an object being created.
type CreateFunc[T client.Object] func(ctx context.Context, obj T) (admission.Warnings, field.ErrorList)

// UpdateFunc validates an update from oldObj to newObj.
type UpdateFunc[T client.Object] func(ctx context.Context, oldObj, newObj T) (admission.Warnings, field.ErrorList)

// DeleteFunc validates the deletion of obj (the object as it is stored).
type DeleteFunc[T client.Object] func(ctx context.Context, obj T) (admission.Warnings, field.ErrorList)

// Validator is an [admission.Validator] built from one function per operation.
// A nil function allows that operation, so the zero Validator allows everything
// and a validator that only guards updates sets only Update.
//
// Every field error a function returns is reported in ONE denial built with
// apierrors.NewInvalid, so the API server answers 422 Invalid and kubectl
// prints every field path, not just the first. Warnings are returned to the
// client whether the request is allowed or denied.
//
// A function that panics does not crash the webhook server and does not turn
// into a 500: the request is denied (403) with a message naming the object and
// the panic value.
//
// Use it with [Install], or with controller-runtime's
// builder.WebhookManagedBy(mgr, obj).WithValidator(v).
type Validator[T client.Object] struct {
	Create CreateFunc[T]
	Update UpdateFunc[T]
	Delete DeleteFunc[T]
}

var _ admission.Validator[client.Object] = Validator[client.Object]{}

// ValidateCreate implements [admission.Validator].
func (v Validator[T]) ValidateCreate(ctx context.Context, obj T) (warnings admission.Warnings, err error) {
	if v.Create == nil {
		return nil, nil
	}
	defer recoverAsDenial(ctx, obj, "validating", &err)
	w, errs := v.Create(ctx, obj)
	return w, invalid(ctx, obj, errs)
}

// ValidateUpdate implements [admission.Validator].
func (v Validator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (warnings admission.Warnings, err error) {
	if v.Update == nil {
		return nil, nil
	}
	defer recoverAsDenial(ctx, newObj, "validating", &err)
	w, errs := v.Update(ctx, oldObj, newObj)
	return w, invalid(ctx, newObj, errs)
}

// ValidateDelete implements [admission.Validator].
func (v Validator[T]) ValidateDelete(ctx context.Context, obj T) (warnings admission.Warnings, err error) {
	if v.Delete == nil {
		return nil, nil
	}
	defer recoverAsDenial(ctx, obj, "validating", &err)
	w, errs := v.Delete(ctx, obj)
	return w, invalid(ctx, obj, errs)
}

// DefaultFunc is an [admission.Defaulter] from a function. It must be
// deterministic and idempotent: defaulting an already-defaulted object must
// change nothing (check with webhooktest.DefaultingIsIdempotent). An error
// denies the request; a panic is recovered and denies it with a message.
type DefaultFunc[T client.Object] func(ctx context.Context, obj T) error

var _ admission.Defaulter[client.Object] = DefaultFunc[client.Object](nil)

// Default implements [admission.Defaulter]. A nil DefaultFunc changes nothing.
func (f DefaultFunc[T]) Default(ctx context.Context, obj T) (err error) {
	if f == nil {
		return nil
	}
	defer recoverAsDenial(ctx, obj, "defaulting", &err)
	return f(ctx, obj)
}

// invalid aggregates errs into one Invalid status error, or returns nil.
func invalid(ctx context.Context, obj client.Object, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	name := obj.GetName()
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	// The request names the kind even when the decoded object's TypeMeta is
	// empty, and names the object when it is created with generateName.
	if req, err := admission.RequestFromContext(ctx); err == nil {
		gk = schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
		if name == "" {
			name = req.Name
		}
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// recoverAsDenial turns a panic in user code into a denial. The error is a
// plain error (not an APIStatus), which controller-runtime reports as
// 403 Forbidden with the message, never as a 500.
func recoverAsDenial(ctx context.Context, obj client.Object, what string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	ref := objectRef(ctx, obj)
	*err = fmt.Errorf("%s webhook for %s panicked (request denied; this is a bug in the webhook): %v", what, ref, r)
}

func objectRef(ctx context.Context, obj client.Object) string {
	ns, name := "", ""
	if obj != nil {
		ns, name = obj.GetNamespace(), obj.GetName()
	}
	if req, err := admission.RequestFromContext(ctx); err == nil {
		if name == "" {
			name = req.Name
		}
		if ns == "" {
			ns = req.Namespace
		}
	}
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
