package controller

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
)

// Port is the database server's port.
const Port = 5432

// LabelBackupReason is set on backup Jobs: backup.ReasonPreUpgrade or backup.ReasonFinal.
const LabelBackupReason = "db.example.com/backup-reason"

// Labels select the database pods of db: the StatefulSet's selector and the
// headless Service's. Backup Jobs carry other labels (component=backup), so
// the Service never routes to them.
func Labels(db *dbv1.Database) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "database",
		"app.kubernetes.io/instance":   db.Name,
		"app.kubernetes.io/component":  "server",
		"app.kubernetes.io/managed-by": "opkit-database",
	}
}

// Image is the container image of version in repository, e.g.
// "ghcr.io/opkit/example-db:v2".
func Image(repository, version string) string { return repository + ":" + version }

// Service declares the headless Service that gives every replica a stable
// DNS name (<db>-<ordinal>.<db>.<namespace>.svc). Not-ready replicas are
// published too: database peers must find each other while they start.
func Service(db *dbv1.Database) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name, Labels: Labels(db)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 Labels(db),
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "db", Port: Port, TargetPort: intstr.FromString("db"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// StatefulSet declares db's StatefulSet running image with the given
// RollingUpdate partition: pods with an ordinal >= partition run the
// template, the others keep the revision they have. Partition 0 outside
// upgrades; the Upgrading phase steps it down one ordinal at a time.
func StatefulSet(db *dbv1.Database, image string, partition int32) *appsv1.StatefulSet {
	labels := Labels(db)
	container := corev1.Container{
		Name:         "db",
		Image:        image,
		Args:         []string{"serve", "--data=/var/lib/db", "--peers=" + db.Name},
		Ports:        []corev1.ContainerPort{{Name: "db", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db"}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("db")}},
			PeriodSeconds: 5,
		},
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			ServiceName:         db.Name,
			Replicas:            ptr.To(db.DesiredReplicas()),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition)},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container}},
			},
		},
	}
	if s := db.Spec.Storage; s != nil {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: s.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: s.Size}},
			},
		}}
	} else {
		sts.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	return sts
}

// PreUpgradeBackupName names the backup taken before the upgrade that
// generation asked for; a later spec change that still needs a backup gets
// a new one.
func PreUpgradeBackupName(db *dbv1.Database) string {
	return db.Name + "-backup-" + strconv.FormatInt(db.Generation, 10)
}

// FinalBackupName names the backup taken when db is deleted.
func FinalBackupName(db *dbv1.Database) string { return db.Name + "-backup-final" }

// BackupJob declares the Job that dumps db's data (from replica 0, running
// version) into the backup store under name. The Job belongs to the
// Database; the catalog keeps the record after both are gone.
func BackupJob(db *dbv1.Database, repository, name, reason, version string) *batchv1.Job {
	labels := map[string]string{
		"app.kubernetes.io/name":       "database",
		"app.kubernetes.io/instance":   db.Name,
		"app.kubernetes.io/component":  "backup",
		"app.kubernetes.io/managed-by": "opkit-database",
		LabelBackupReason:              reason,
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "backup",
						Image: Image(repository, version),
						Args: []string{"backup",
							fmt.Sprintf("--from=%s-0.%s.%s.svc:%d", db.Name, db.Name, db.Namespace, Port),
							fmt.Sprintf("--to=backups/%s/%s/%s", db.Namespace, db.Name, name)},
					}},
				},
			},
		},
	}
}
