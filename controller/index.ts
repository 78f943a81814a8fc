/** Public barrel of the controller package. `cli/` imports only from here. */
export * from './spec/index.js';
export * from './errors.js';
export { VERSION } from './version.js';
