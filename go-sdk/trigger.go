package gantry

// TriggerKind says why the host calls.
type TriggerKind int

// The reasons for a call, as in the WIT `trigger` variant.
const (
	// ParentChanged: the parent was created or changed.
	ParentChanged TriggerKind = iota
	// ChildChanged: one of the parent's children changed or was deleted.
	ChildChanged
	// RelatedChanged: a related object changed or was deleted.
	RelatedChanged
	// Resync: the binding's periodic resync.
	Resync
	// Requeue: a requeue the plugin asked for, or a retry.
	Requeue
	// PluginChanged: the plugin itself was replaced by a new version.
	PluginChanged
)

var triggerNames = [...]string{"parent-changed", "child-changed", "related-changed", "resync", "requeue", "plugin-changed"}

// String is the WIT spelling, e.g. "child-changed".
func (k TriggerKind) String() string {
	if int(k) < len(triggerNames) {
		return triggerNames[k]
	}
	return "unknown"
}

// ObjectRef names one Kubernetes object.
type ObjectRef struct {
	// APIVersion is group/version, or v1 for the core group.
	APIVersion string
	// Kind is the object's kind, e.g. Deployment.
	Kind string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
}

// Trigger is why the host calls: informational, since a correct plugin
// gives the same answer whatever the trigger.
type Trigger struct {
	// Kind of trigger.
	Kind TriggerKind
	// Object is the child or related object that changed (ChildChanged and
	// RelatedChanged only).
	Object *ObjectRef
}
