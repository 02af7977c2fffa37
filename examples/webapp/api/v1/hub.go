package v1

// Hub marks v1 as the conversion hub: the version the operator works with;
// apps.example.com/v1beta1 converts to and from it.
func (*WebApp) Hub() {}
