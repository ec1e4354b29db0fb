import { describe, expect, it } from 'vitest';
import { recordJsonSchema } from '../../src/lifecycle/record.js';
import { committedSchema } from './helpers.js';

describe('record schema', () => {
  it('the committed schema/record.v1.schema.json is exactly recordJsonSchema', () => {
    expect(committedSchema).toEqual(JSON.parse(JSON.stringify(recordJsonSchema)));
  });
});
