package storageversion_test

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/storageversion"
)

// A CRD upgraded from storing v1 to storing v2: the migrator rewrites its
// objects at v2 and trims status.storedVersions, after which v1 can be
// dropped from the CRD. (env is this package's test control plane.)
func ExampleMigrator_Migrate() {
	ctx := context.Background()
	const group = "example.storage.opkit.dev"
	_, _ = env.ApplyCRD(ctx, widgets(group, map[string]bool{"v1": true}, "v1"))
	_ = env.Client.Create(ctx, widget(group, "v1", "default", "w", 1))
	crd, _ := env.ApplyCRD(ctx, widgets(group, map[string]bool{"v1": true, "v2": true}, "v2", "v1"))
	fmt.Println("before:", crd.Status.StoredVersions)

	m := storageversion.New(env.Client, []string{"widgets." + group})
	if err := m.Migrate(ctx, "widgets."+group); err != nil {
		fmt.Println(err)
		return
	}
	_ = env.Client.Get(ctx, client.ObjectKey{Name: "widgets." + group}, crd)
	p, _ := storageversion.ReadProgress(crd)
	fmt.Println("after:", crd.Status.StoredVersions, "migrated:", p.Migrated)
	_ = env.Client.Delete(ctx, crd)
	// Output:
	// before: [v1 v2]
	// after: [v2] migrated: 1
}
