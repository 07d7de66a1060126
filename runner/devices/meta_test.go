package devices_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func metaUID(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}
}
