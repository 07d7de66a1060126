package runner

import (
	"time"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/runner/imagegc"
)

// The kubelet's image garbage collection defaults (--image-gc-high-threshold,
// --image-gc-low-threshold, --image-minimum-gc-age) and its period (ImageGCPeriod).
const (
	DefaultImageGCHighThreshold = 85
	DefaultImageGCLowThreshold  = 80
	DefaultImageMinimumGCAge    = 2 * time.Minute
	DefaultImageGCPeriod        = 5 * time.Minute
)

// Event reasons of image garbage collection (imagegc). FreeDiskSpaceFailed is the
// kubelet's.
const (
	ReasonImageRemoved        = imagegc.ReasonImageRemoved
	ReasonFreeDiskSpaceFailed = imagegc.ReasonFreeDiskSpaceFailed
	ReasonImageGCFailed       = imagegc.ReasonImageGCFailed
)

// ImageStore is what image garbage collection needs from a runtime, beside Runtime
// (imagegc.Store).
type ImageStore = imagegc.Store

// FSUsage is the size and free space of a filesystem, in bytes.
type FSUsage = imagegc.FSUsage

// ImageGCPolicy is the kubelet's image garbage collection policy (imagegc.Policy).
type ImageGCPolicy = imagegc.Policy

// StoredImage is an image in the runtime; clients read it as wire.StoredImage.
type StoredImage = wire.StoredImage

// ImageUse is an image with what garbage collection weighs: whether a known pod needs
// it and when one last did. Clients read it as wire.ImageUse.
type ImageUse = wire.ImageUse
