package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SkipFinalBackupAnnotation waives the final backup that deleting a Database
// otherwise takes. Only the exact value "true" waives it; any other value, or
// no annotation, keeps the fail-safe: the Database (and, through garbage
// collection, its StatefulSet) is not removed until the final backup has
// completed. Set it before or during deletion:
//
//	kubectl annotate database/orders db.example.com/skip-final-backup=true
const SkipFinalBackupAnnotation = "db.example.com/skip-final-backup"

// DatabaseSpec is what the user asks for: a replicated database server of a
// given version, run as a StatefulSet behind a headless Service.
//
// +kubebuilder:validation:XValidation:rule="has(self.storage) == has(oldSelf.storage) && (!has(self.storage) || self.storage == oldSelf.storage)",message="storage is immutable: a StatefulSet's volumeClaimTemplates cannot change"
type DatabaseSpec struct {
	// Version of the database server, e.g. "v1" or "v2"; it is the image tag.
	// Changing it upgrades the Database: a backup first (see Backup), then
	// the replicas one at a time, highest ordinal first, each waiting for the
	// previous one to be Ready.
	// +kubebuilder:validation:Pattern=`^v[0-9]+(\.[0-9]+){0,2}$`
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version"`

	// Replicas is the number of database pods.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:default=3
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Storage, when set, gives every replica a PersistentVolumeClaim of this
	// size (a volumeClaimTemplate; claims outlive the Database). Unset, the
	// data directory is an emptyDir. Immutable.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// Backup is the backup policy.
	// +optional
	Backup BackupPolicy `json:"backup,omitempty"`
}

// StorageSpec sizes each replica's PersistentVolumeClaim.
type StorageSpec struct {
	// Size of each replica's claim, e.g. "10Gi".
	Size resource.Quantity `json:"size"`

	// StorageClassName of the claims; unset uses the cluster's default class.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// BackupPolicy says when the operator backs the Database up. The final
// backup on deletion is not part of the policy: it is always taken, unless
// the Database carries SkipFinalBackupAnnotation.
type BackupPolicy struct {
	// BeforeUpgrade takes a backup before every version change (phase
	// BackingUp) and starts the upgrade only once it completed.
	// +kubebuilder:default=true
	// +optional
	BeforeUpgrade *bool `json:"beforeUpgrade,omitempty"`
}

// BackupRecord describes a completed backup.
type BackupRecord struct {
	// Name identifies the backup: the name of the Job that took it, and its
	// ID in the backup catalog.
	Name string `json:"name"`
	// Version is the database version the backup was taken from.
	Version string `json:"version"`
	// Reason is why it was taken: PreUpgrade or Final.
	Reason string `json:"reason"`
	// CompletionTime is when the backup finished.
	CompletionTime metav1.Time `json:"completionTime"`
}

// DatabaseStatus is what the operator observed.
type DatabaseStatus struct {
	// Phase is where the Database is in its life cycle: Pending,
	// Provisioning, Ready, BackingUp, Upgrading, Degraded or Deleting.
	// Conditions are the truth; the phase is the path.
	// +optional
	Phase string `json:"phase,omitempty"`

	// PhaseTransitionTime is when the current phase was entered.
	// +optional
	PhaseTransitionTime *metav1.Time `json:"phaseTransitionTime,omitempty"`

	// ObservedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// CurrentVersion is the version every replica runs. During an upgrade
	// it is the version being left; it becomes spec.version when the last
	// replica is updated and Ready.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`

	// Replicas mirrors the StatefulSet's status.replicas (pods that exist, of
	// any version); the scale subresource reports it as status.replicas.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas mirrors the StatefulSet's ready replicas.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the Database's pods, in the string
	// form the scale subresource reports.
	// +optional
	Selector string `json:"selector,omitempty"`

	// LastBackup is the most recent completed backup.
	// +optional
	LastBackup *BackupRecord `json:"lastBackup,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, Degraded (kstatus-compatible,
	// kept by the phase machine) and ReplicasReady (all replicas Ready; its
	// lastTransitionTime says since when they are not).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Database is a replicated database server: a StatefulSet and a headless
// Service, upgraded one replica at a time after a backup, and backed up once
// more before it is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=db,categories=all
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="name must be at most 40 characters (pod, Job and label names derive from it)"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Last Backup",type=string,JSONPath=`.status.lastBackup.name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// BackupBeforeUpgrade reports whether an upgrade starts with a backup (the
// default when the policy leaves it unset).
func (d *Database) BackupBeforeUpgrade() bool {
	return d.Spec.Backup.BeforeUpgrade == nil || *d.Spec.Backup.BeforeUpgrade
}

// DesiredReplicas is spec.replicas, or its default 3 when unset (an object
// that bypassed the schema default).
func (d *Database) DesiredReplicas() int32 {
	if d.Spec.Replicas <= 0 {
		return 3
	}
	return d.Spec.Replicas
}

// DatabaseList is a list of Databases.
//
// +kubebuilder:object:root=true
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}
