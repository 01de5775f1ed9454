//===- PxOps.td - all px operations ---------------------------*- tablegen -*-===//
#ifndef PARALLAX_DIALECT_PX_PXOPS_TD
#define PARALLAX_DIALECT_PX_PXOPS_TD
include "PxTensorOps.td"
include "PxSyncOps.td"
include "PxTrainingOps.td"
#endif
