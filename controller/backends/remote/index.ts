/** The remote-host machinery adapters compose: a host over a transport, its bootstrap, its GPUs. */
export {
  RemoteHost,
  sshHostOf,
  type Launched,
  type PreparedJob,
  type RemoteHostOptions,
  type RemoteTransport,
} from './host.js';
export { bootstrapScript, envFile, remoteJobEnv, type JobPlacement } from './bootstrap.js';
export { hostGpuCapacity, parseNvidiaSmi } from './capacity.js';
export { execBundlePath, packFiles } from './pack.js';
